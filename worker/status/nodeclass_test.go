package status

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/cloud"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// resolvedDefault is what the example class resolves to on the emulator:
// two subnets, one group, the al2023 alias's standard and nvidia AMIs.
func resolvedDefault() *cloud.ResolvedNodeClass {
	return &cloud.ResolvedNodeClass{
		Name: "default", AMIFamily: apisv1.AMIFamilyAL2023,
		Subnets: []cloud.Subnet{
			{ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az1", AvailableIPs: 100},
			{ID: "subnet-b", Zone: "us-east-1b", ZoneID: "use1-az2", AvailableIPs: 100},
		},
		SecurityGroups: []cloud.SecurityGroup{{ID: "sg-1", Name: "nodes"}},
		Images: []cloud.Image{
			{ID: "ami-std", Name: "amazon-eks-node-al2023-x86_64-standard-1.33-v1", Arch: "amd64", Variant: "standard"},
			{ID: "ami-gpu", Name: "amazon-eks-node-al2023-x86_64-nvidia-1.33-v1", Arch: "amd64", Variant: "nvidia"},
		},
		InstanceProfile: "MillwrightNodeRole-millwright",
	}
}

var partConditions = []string{
	apisv1.ConditionTypeSubnetsReady, apisv1.ConditionTypeSecurityGroupsReady,
	apisv1.ConditionTypeAMIsReady, apisv1.ConditionTypeInstanceProfileReady,
}

// parts expects every part condition to be status with reason, except
// the one named by failed (if any).
func parts(status metav1.ConditionStatus, reason string, failed string, failedWant wantCondition) map[string]wantCondition {
	want := map[string]wantCondition{}
	for _, c := range partConditions {
		want[c] = wantCondition{status: status, reason: reason}
		if status == metav1.ConditionTrue {
			want[c] = wantCondition{status: status, reason: c}
		}
	}
	if failed != "" {
		want[failed] = failedWant
	}
	return want
}

func TestNodeClassStatus(t *testing.T) {
	tests := []struct {
		name       string
		class      *classBuilder
		resolution func(*apisv1.EC2NodeClass) Resolution
		// wantResolved: the lists are the resolved ones (else empty).
		wantResolved bool
		want         map[string]wantCondition
	}{{
		name:         "a resolved class lists what it resolved to and is ready",
		class:        aClass(t),
		resolution:   func(*apisv1.EC2NodeClass) Resolution { return Resolution{Resolved: resolvedDefault()} },
		wantResolved: true,
		want: merge(parts(metav1.ConditionTrue, "", "", wantCondition{}), map[string]wantCondition{
			apisv1.ConditionTypeValidationSucceeded: {status: metav1.ConditionTrue, reason: apisv1.ConditionTypeValidationSucceeded},
			apisv1.ConditionTypeReady:               {status: metav1.ConditionTrue, reason: apisv1.ConditionTypeReady, since: now},
		}),
	}, {
		name:  "no matching subnet: SubnetsReady and Ready are False naming the field",
		class: aClass(t),
		resolution: func(*apisv1.EC2NodeClass) Resolution {
			return Resolution{Unresolved: activities.NewInvalidNodeClassError("default", "spec.subnetSelectorTerms", "matched no subnet")}
		},
		want: merge(parts(metav1.ConditionUnknown, ReasonNotResolved, apisv1.ConditionTypeSubnetsReady, wantCondition{
			status: metav1.ConditionFalse, reason: ReasonSubnetsNotResolved,
			messageHas: []string{`EC2NodeClass "default": spec.subnetSelectorTerms: matched no subnet`},
		}), map[string]wantCondition{
			apisv1.ConditionTypeValidationSucceeded: {status: metav1.ConditionTrue, reason: apisv1.ConditionTypeValidationSucceeded},
			apisv1.ConditionTypeReady: {status: metav1.ConditionFalse, reason: ReasonSubnetsNotResolved,
				messageHas: []string{"SubnetsReady=False", "spec.subnetSelectorTerms: matched no subnet"}},
		}),
	}, {
		name:  "a security group id that does not exist names its term",
		class: aClass(t),
		resolution: func(*apisv1.EC2NodeClass) Resolution {
			return Resolution{Unresolved: activities.NewInvalidNodeClassError("default", "spec.securityGroupSelectorTerms[1].id", "security group sg-9 does not exist")}
		},
		want: map[string]wantCondition{
			apisv1.ConditionTypeSecurityGroupsReady: {status: metav1.ConditionFalse, reason: ReasonSecurityGroupsNotResolved,
				messageHas: []string{"spec.securityGroupSelectorTerms[1].id", "sg-9"}},
			apisv1.ConditionTypeReady: {status: metav1.ConditionFalse, reason: ReasonSecurityGroupsNotResolved},
		},
	}, {
		name:  "no AMI for the alias",
		class: aClass(t),
		resolution: func(*apisv1.EC2NodeClass) Resolution {
			return Resolution{Unresolved: activities.NewInvalidNodeClassError("default", "spec.amiSelectorTerms[0].alias", "no EKS-optimized AMI matches al2023@latest")}
		},
		want: map[string]wantCondition{
			apisv1.ConditionTypeAMIsReady: {status: metav1.ConditionFalse, reason: ReasonAMIsNotResolved, messageHas: []string{"spec.amiSelectorTerms[0].alias"}},
			apisv1.ConditionTypeReady:     {status: metav1.ConditionFalse, reason: ReasonAMIsNotResolved},
		},
	}, {
		name:  "an error naming no known field still makes the class not ready",
		class: aClass(t),
		resolution: func(*apisv1.EC2NodeClass) Resolution {
			return Resolution{Unresolved: activities.NewInvalidNodeClassError("default", "metadata", "cannot be decoded")}
		},
		want: merge(parts(metav1.ConditionUnknown, ReasonNotResolved, "", wantCondition{}), map[string]wantCondition{
			apisv1.ConditionTypeReady: {status: metav1.ConditionFalse, reason: ReasonNodeClassNotResolved, messageHas: []string{"metadata: cannot be decoded"}},
		}),
	}, {
		name:       "an invalid class is not resolved and names the field",
		class:      aClass(t).withoutSubnetTerms(),
		resolution: func(class *apisv1.EC2NodeClass) Resolution { return Resolution{Invalid: class.Validate()} },
		want: merge(parts(metav1.ConditionUnknown, ReasonValidationFailed, "", wantCondition{}), map[string]wantCondition{
			apisv1.ConditionTypeValidationSucceeded: {status: metav1.ConditionFalse, reason: ReasonValidationFailed, messageHas: []string{"spec.subnetSelectorTerms"}},
			apisv1.ConditionTypeReady:               {status: metav1.ConditionFalse, reason: ReasonValidationFailed, messageHas: []string{"spec.subnetSelectorTerms"}},
		}),
	}, {
		name:         "Ready that stays True keeps its transition time",
		class:        aClass(t).withReady(metav1.ConditionTrue, apisv1.ConditionTypeReady, ""),
		resolution:   func(*apisv1.EC2NodeClass) Resolution { return Resolution{Resolved: resolvedDefault()} },
		wantResolved: true,
		want:         map[string]wantCondition{apisv1.ConditionTypeReady: {status: metav1.ConditionTrue, reason: apisv1.ConditionTypeReady, since: earlier}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := tt.class.build()
			got := NodeClassStatus(class, tt.resolution(class), now)
			checkConditions(t, got.Conditions, tt.want)
			if !tt.wantResolved {
				if len(got.Subnets)+len(got.SecurityGroups)+len(got.AMIs) != 0 || got.InstanceProfile != "" {
					t.Errorf("an unresolved class lists %+v", got)
				}
				return
			}
			wantSubnets := []apisv1.Subnet{{ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az1"}, {ID: "subnet-b", Zone: "us-east-1b", ZoneID: "use1-az2"}}
			if !slices.Equal(got.Subnets, wantSubnets) {
				t.Errorf("subnets = %+v, want %+v", got.Subnets, wantSubnets)
			}
			if want := []apisv1.SecurityGroup{{ID: "sg-1", Name: "nodes"}}; !slices.Equal(got.SecurityGroups, want) {
				t.Errorf("security groups = %+v, want %+v", got.SecurityGroups, want)
			}
			if got.InstanceProfile != "MillwrightNodeRole-millwright" {
				t.Errorf("instance profile = %q", got.InstanceProfile)
			}
			if len(got.AMIs) != 2 || got.AMIs[0].ID != "ami-std" || got.AMIs[1].ID != "ami-gpu" {
				t.Fatalf("AMIs = %+v, want ami-std then ami-gpu", got.AMIs)
			}
		})
	}
}

func merge(maps ...map[string]wantCondition) map[string]wantCondition {
	out := map[string]wantCondition{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestImageRequirements: the requirements written for each AMI are the
// instance types the launcher would boot it on (ResolvedNodeClass.ImageFor).
func TestImageRequirements(t *testing.T) {
	arch := corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}
	tests := []struct {
		variant string
		want    []corev1.NodeSelectorRequirement
	}{
		{variant: "", want: []corev1.NodeSelectorRequirement{arch}},
		{variant: "standard", want: []corev1.NodeSelectorRequirement{arch,
			{Key: apisv1.LabelInstanceGPUManufacturer, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"nvidia"}},
			{Key: apisv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist}}},
		{variant: "nvidia", want: []corev1.NodeSelectorRequirement{arch,
			{Key: apisv1.LabelInstanceGPUManufacturer, Operator: corev1.NodeSelectorOpIn, Values: []string{"nvidia"}}}},
		{variant: "neuron", want: []corev1.NodeSelectorRequirement{arch,
			{Key: apisv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpExists}}},
	}
	for _, tt := range tests {
		got := imageRequirements(cloud.Image{ID: "ami-1", Arch: "arm64", Variant: tt.variant})
		if !slices.EqualFunc(got, tt.want, func(a, b corev1.NodeSelectorRequirement) bool {
			return a.Key == b.Key && a.Operator == b.Operator && slices.Equal(a.Values, b.Values)
		}) {
			t.Errorf("variant %q: requirements %+v, want %+v", tt.variant, got, tt.want)
		}
	}
}

// TestResolutionMessageDropsTemporalDecoration: a condition message is the
// resolver's words, not Temporal's "(type: ..., retryable: ...)".
func TestResolutionMessageDropsTemporalDecoration(t *testing.T) {
	err := activities.NewInvalidNodeClassError("default", "spec.subnetSelectorTerms", "matched no subnet")
	if got, want := resolutionMessage(err), `EC2NodeClass "default": spec.subnetSelectorTerms: matched no subnet`; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if got := resolutionMessage(errors.New("plain")); got != "plain" {
		t.Errorf("message %q, want plain", got)
	}
}

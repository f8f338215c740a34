package cloud

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/awsemu"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// launchCase is one Launch against a fresh emulator.
type launchCase struct {
	name string
	// options are built with the fixture (its prices).
	options func(f *fixture) []activities.InstanceTypeOption
	faults  []awsemu.CapacityFault
	check   func(t *testing.T, f *fixture, req activities.LaunchRequest, resp activities.LaunchResponse)
}

func TestLaunchChoosesOfferingAndStrategy(t *testing.T) {
	cases := []launchCase{
		{
			name: "spot offered: spot, price-capacity-optimized",
			options: func(f *fixture) []activities.InstanceTypeOption {
				return []activities.InstanceTypeOption{f.option("m5.large"), f.option("m5.xlarge")}
			},
			check: func(t *testing.T, f *fixture, req activities.LaunchRequest, resp activities.LaunchResponse) {
				if resp.CapacityType != activities.CapacityTypeSpot {
					t.Errorf("capacity type %s, want spot", resp.CapacityType)
				}
				fleet := onlyFleet(t, f)
				if fleet.Strategies["spot"] != "price-capacity-optimized" || fleet.Targets["spot"] != 1 {
					t.Errorf("fleet targets %v strategies %v, want 1 spot with price-capacity-optimized", fleet.Targets, fleet.Strategies)
				}
			},
		},
		{
			name: "on-demand only: lowest-price picks the cheapest type, whatever the option order",
			options: func(f *fixture) []activities.InstanceTypeOption {
				return []activities.InstanceTypeOption{
					f.option("m5.2xlarge", activities.CapacityTypeOnDemand),
					f.option("m5.large", activities.CapacityTypeOnDemand),
				}
			},
			check: func(t *testing.T, f *fixture, req activities.LaunchRequest, resp activities.LaunchResponse) {
				if resp.InstanceType != "m5.large" || resp.CapacityType != activities.CapacityTypeOnDemand {
					t.Errorf("launched %s %s, want on-demand m5.large", resp.CapacityType, resp.InstanceType)
				}
				if resp.PricePerHour != catalogSpec(t, "m5.large").OnDemandPrice {
					t.Errorf("price %v, want m5.large's %v", resp.PricePerHour, catalogSpec(t, "m5.large").OnDemandPrice)
				}
				if fleet := onlyFleet(t, f); fleet.Strategies["on-demand"] != "lowest-price" || fleet.Targets["on-demand"] != 1 {
					t.Errorf("fleet targets %v strategies %v, want 1 on-demand with lowest-price", fleet.Targets, fleet.Strategies)
				}
			},
		},
		{
			name: "ICE on one type: falls to the next within one CreateFleet, ICE remembered",
			options: func(f *fixture) []activities.InstanceTypeOption {
				return []activities.InstanceTypeOption{
					f.option("m5.large", activities.CapacityTypeOnDemand),
					f.option("m5.xlarge", activities.CapacityTypeOnDemand),
				}
			},
			faults: []awsemu.CapacityFault{{InstanceType: "m5.large", CapacityType: "on-demand"}},
			check: func(t *testing.T, f *fixture, req activities.LaunchRequest, resp activities.LaunchResponse) {
				if resp.InstanceType != "m5.xlarge" {
					t.Errorf("launched %s, want m5.xlarge", resp.InstanceType)
				}
				fleet := onlyFleet(t, f)
				if len(fleet.Errors) != 3 {
					t.Errorf("fleet errors %v, want m5.large's ICE in 3 zones", fleet.Errors)
				}
				want := offeringKeys("m5.large", activities.CapacityTypeOnDemand, "us-east-1a", "us-east-1b", "us-east-1c")
				if got := unavailableKeys(f); !reflect.DeepEqual(got, want) {
					t.Errorf("unavailable = %v, want %v", got, want)
				}
			},
		},
		{
			name: "ICE in one zone: another zone of the same type",
			options: func(f *fixture) []activities.InstanceTypeOption {
				return []activities.InstanceTypeOption{f.option("c5.large", activities.CapacityTypeOnDemand)}
			},
			faults: []awsemu.CapacityFault{{InstanceType: "c5.large", Zone: "us-east-1a"}},
			check: func(t *testing.T, f *fixture, req activities.LaunchRequest, resp activities.LaunchResponse) {
				if resp.InstanceType != "c5.large" || resp.Zone == "us-east-1a" {
					t.Errorf("launched %s in %s, want c5.large outside us-east-1a", resp.InstanceType, resp.Zone)
				}
				want := offeringKeys("c5.large", activities.CapacityTypeOnDemand, "us-east-1a")
				if got := unavailableKeys(f); !reflect.DeepEqual(got, want) {
					t.Errorf("unavailable = %v, want %v", got, want)
				}
			},
		},
		{
			name: "arm64 type: the arm64 AMI",
			options: func(f *fixture) []activities.InstanceTypeOption {
				return []activities.InstanceTypeOption{
					f.option("m6g.large", activities.CapacityTypeOnDemand),
					f.option("m5.large", activities.CapacityTypeOnDemand),
				}
			},
			check: func(t *testing.T, f *fixture, req activities.LaunchRequest, resp activities.LaunchResponse) {
				if resp.InstanceType != "m6g.large" {
					t.Fatalf("launched %s, want the cheaper m6g.large", resp.InstanceType)
				}
				assertImage(t, f, resp.ImageID, "arm64", "standard")
			},
		},
		{
			name: "NVIDIA GPU type: the nvidia AMI variant",
			options: func(f *fixture) []activities.InstanceTypeOption {
				return []activities.InstanceTypeOption{f.option("g4dn.xlarge", activities.CapacityTypeOnDemand)}
			},
			check: func(t *testing.T, f *fixture, req activities.LaunchRequest, resp activities.LaunchResponse) {
				assertImage(t, f, resp.ImageID, "amd64", "nvidia")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			for _, fault := range tc.faults {
				if err := f.emu.AddCapacityFault(fault); err != nil {
					t.Fatal(err)
				}
			}
			req := launchRequest("default-abc12", tc.options(f)...)
			resp, err := f.provider.Launch(context.Background(), req)
			if err != nil {
				t.Fatalf("Launch: %v", err)
			}
			assertConsistentResponse(t, f, req, resp)
			tc.check(t, f, req, resp)
		})
	}
}

// assertConsistentResponse checks what every successful launch must say:
// the instance the emulator has, under the offering the request priced, with
// Millwright's tags, and no launch template left behind.
func assertConsistentResponse(t *testing.T, f *fixture, req activities.LaunchRequest, resp activities.LaunchResponse) {
	t.Helper()
	inst, ok := f.emu.State().Instance(resp.InstanceID)
	if !ok {
		t.Fatalf("instance %s not in the emulator", resp.InstanceID)
	}
	if inst.InstanceType != resp.InstanceType || inst.Zone != resp.Zone || inst.CapacityType != resp.CapacityType ||
		inst.PrivateDNSName != resp.Hostname || inst.ImageID != resp.ImageID || inst.SubnetID != resp.SubnetID {
		t.Errorf("response %+v disagrees with the instance %+v", resp, inst)
	}
	if resp.SubnetID == "" || len(resp.SecurityGroupIDs) == 0 {
		t.Errorf("response %+v lacks the subnet or security groups (drift stamps)", resp)
	}
	if want := "aws:///" + resp.Zone + "/" + resp.InstanceID; resp.ProviderID != want {
		t.Errorf("providerID %q, want %q", resp.ProviderID, want)
	}
	if want := offeringPrice(req.Options, resp.InstanceType, resp.Zone, resp.CapacityType); resp.PricePerHour != want || want == 0 {
		t.Errorf("price %v, want the request's %v", resp.PricePerHour, want)
	}
	if resp.Hostname == "" || resp.LaunchTime.IsZero() {
		t.Errorf("hostname %q launch time %v", resp.Hostname, resp.LaunchTime)
	}
	wantTags := map[string]string{
		"kubernetes.io/cluster/" + testCluster: "owned",
		"millwright.dev/cluster":               testCluster,
		"millwright.dev/nodepool":              req.NodePool,
		"millwright.dev/ec2nodeclass":          req.NodeClassName,
		"millwright.dev/nodeclaim":             req.NodeClaimName,
		"millwright.dev/workflow-id":           req.WorkflowID,
		"Name":                                 testCluster + "/" + req.NodeClaimName,
		"team":                                 "platform",
	}
	for k, v := range wantTags {
		if inst.Tags[k] != v {
			t.Errorf("tag %s = %q, want %q (tags %v)", k, inst.Tags[k], v, inst.Tags)
		}
	}
	if lts := f.emu.State().LaunchTemplates; len(lts) != 0 {
		t.Errorf("launch templates left behind: %v", lts)
	}
}

func assertImage(t *testing.T, f *fixture, imageID, arch, variant string) {
	t.Helper()
	resolved, err := f.provider.NodeClasses.Resolve(context.Background(), testNodeClass())
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range resolved.Images {
		if im.ID == imageID {
			if im.Arch != arch || im.Variant != variant {
				t.Fatalf("image %s is %s/%s, want %s/%s", im.Name, im.Arch, im.Variant, arch, variant)
			}
			return
		}
	}
	t.Fatalf("image %s is not one the NodeClass selects (%v)", imageID, resolved.Images)
}

func onlyFleet(t *testing.T, f *fixture) awsemu.FleetState {
	t.Helper()
	fleets := f.emu.State().Fleets
	if len(fleets) != 1 {
		t.Fatalf("%d CreateFleet calls recorded, want 1", len(fleets))
	}
	return fleets[0]
}

func offeringKeys(instanceType, capacityType string, zones ...string) []activities.OfferingKey {
	out := make([]activities.OfferingKey, len(zones))
	for i, z := range zones {
		out[i] = activities.OfferingKey{InstanceType: instanceType, Zone: z, CapacityType: capacityType}
	}
	return out
}

func unavailableKeys(f *fixture) []activities.OfferingKey {
	var out []activities.OfferingKey
	for _, u := range f.provider.Unavailable.List() {
		out = append(out, u.OfferingKey)
	}
	return out
}

func sortedKeys(keys []activities.OfferingKey) []activities.OfferingKey {
	out := append([]activities.OfferingKey(nil), keys...)
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func TestLaunchInsufficientCapacityEverywhere(t *testing.T) {
	f := newFixture(t)
	if err := f.emu.AddCapacityFault(awsemu.CapacityFault{CapacityType: "spot"}); err != nil {
		t.Fatal(err)
	}
	options := []activities.InstanceTypeOption{f.option("m5.large"), f.option("m5.xlarge")}
	req := launchRequest("default-ice", options...)
	_, err := f.provider.Launch(context.Background(), req)
	assertUnwrappedApplicationError(t, err, activities.InsufficientCapacityErrorType, true)
	offerings, ok := activities.InsufficientCapacityOfferings(err)
	if !ok {
		t.Fatalf("error %v is not InsufficientCapacity", err)
	}
	want := sortedKeys(append(
		offeringKeys("m5.large", activities.CapacityTypeSpot, "us-east-1a", "us-east-1b", "us-east-1c"),
		offeringKeys("m5.xlarge", activities.CapacityTypeSpot, "us-east-1a", "us-east-1b", "us-east-1c")...))
	if got := sortedKeys(offerings); !reflect.DeepEqual(got, want) {
		t.Fatalf("error names offerings %v, want %v", got, want)
	}
	if got := unavailableKeys(f); !reflect.DeepEqual(got, want) {
		t.Fatalf("unavailable = %v, want %v", got, want)
	}
	for _, u := range f.provider.Unavailable.List() {
		if !u.Until.Equal(testStart.Add(activities.UnavailableOfferingTTL)) {
			t.Fatalf("%s unavailable until %v, want %v", u, u.Until, testStart.Add(activities.UnavailableOfferingTTL))
		}
	}
	if live := f.liveInstances(); len(live) != 0 {
		t.Fatalf("instances launched: %v", live)
	}

	// The workflow drops the failed offerings and launches again: on-demand.
	remaining := removeOfferings(options, offerings)
	retry := launchRequest("default-ice", remaining...)
	if retry.ClientToken == req.ClientToken {
		t.Fatal("different options must give a different client token")
	}
	resp, err := f.provider.Launch(context.Background(), retry)
	if err != nil {
		t.Fatalf("on-demand launch after spot ICE: %v", err)
	}
	if resp.CapacityType != activities.CapacityTypeOnDemand {
		t.Fatalf("launched %s, want on-demand", resp.CapacityType)
	}

	// The offerings come back after the TTL, not before.
	f.clock.Step(activities.UnavailableOfferingTTL)
	if len(f.provider.Unavailable.List()) != len(want) {
		t.Fatal("offerings available again before the TTL passed")
	}
	f.clock.Step(time.Second)
	if left := f.provider.Unavailable.List(); len(left) != 0 {
		t.Fatalf("offerings still unavailable after the TTL: %v", left)
	}
}

func removeOfferings(options []activities.InstanceTypeOption, failed []activities.OfferingKey) []activities.InstanceTypeOption {
	drop := map[activities.OfferingKey]bool{}
	for _, k := range failed {
		drop[k] = true
	}
	var out []activities.InstanceTypeOption
	for _, o := range options {
		kept := activities.InstanceTypeOption{Name: o.Name}
		for _, off := range o.Offerings {
			if !drop[activities.OfferingKey{InstanceType: o.Name, Zone: off.Zone, CapacityType: off.CapacityType}] {
				kept.Offerings = append(kept.Offerings, off)
			}
		}
		if len(kept.Offerings) > 0 {
			out = append(out, kept)
		}
	}
	return out
}

func TestLaunchRetriedWithSameTokenReturnsSameInstance(t *testing.T) {
	f := newFixture(t)
	req := launchRequest("default-retry", f.option("m5.large"), f.option("c5.large"))
	first, err := f.provider.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	// The activity timed out after EC2 launched: Temporal runs it again.
	second, err := f.provider.Launch(context.Background(), req)
	if err != nil {
		t.Fatalf("retried Launch: %v", err)
	}
	if second.InstanceID != first.InstanceID || second.ProviderID != first.ProviderID {
		t.Fatalf("retry launched %s, first call %s", second.InstanceID, first.InstanceID)
	}
	state := f.emu.State()
	if live := state.LiveInstances(); len(live) != 1 {
		t.Fatalf("%d live instances after a retried launch, want 1: %v", len(live), live)
	}
	if len(state.Fleets) != 1 {
		t.Fatalf("%d fleets recorded, want 1 (the retry is a replay)", len(state.Fleets))
	}
	if len(state.LaunchTemplates) != 0 {
		t.Fatalf("launch templates left behind: %v", state.LaunchTemplates)
	}

	// The same token with changed parameters (e.g. a new AMI released
	// between the attempts): EC2 refuses the replay, the instance is found
	// by its node-claim tag instead of launching another.
	changed := req
	changed.Labels = map[string]string{"team": "b"}
	third, err := f.provider.Launch(context.Background(), changed)
	if err != nil {
		t.Fatalf("retried Launch with changed parameters: %v", err)
	}
	if third.InstanceID != first.InstanceID {
		t.Fatalf("retry with changed parameters gave %s, want %s", third.InstanceID, first.InstanceID)
	}
	if live := f.liveInstances(); len(live) != 1 {
		t.Fatalf("%d live instances, want 1", len(live))
	}
}

// The userData Launch writes is read back by the emulator's kubelet the way
// nodeadm reads it: the Node registers with the node's labels and taints.
func TestLaunchUserDataRegistersNodeWithLabelsAndTaints(t *testing.T) {
	f := newFixture(t)
	req := launchRequest("default-ud", f.option("m5.large", activities.CapacityTypeOnDemand))
	resp, err := f.provider.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	f.emuClock.Step(time.Minute) // past the emulated boot
	f.emu.Reconcile(context.Background())
	node, ok := f.nodes.byProviderID(resp.ProviderID)
	if !ok {
		inst, _ := f.emu.State().Instance(resp.InstanceID)
		t.Fatalf("no Node registered for %s (registration error %q)", resp.ProviderID, inst.NodeRegistrationError)
	}
	if node.Name != resp.Hostname {
		t.Errorf("Node name %q, want the hostname %q", node.Name, resp.Hostname)
	}
	wantLabels := map[string]string{
		"team":                           "a",
		"millwright.dev/nodepool":        "default",
		"millwright.dev/nodeclaim":       "default-ud",
		"millwright.dev/ec2nodeclass":    "default",
		"millwright.dev/capacity-type":   "on-demand",
		"karpenter.sh/capacity-type":     "on-demand",
		"karpenter.sh/nodepool":          "default",
		"karpenter.k8s.aws/ec2nodeclass": "default",
	}
	for k, v := range wantLabels {
		if got, ok := node.Labels[k]; !ok || got != v {
			t.Errorf("Node label %s = %q (set %v), want %q", k, got, ok, v)
		}
	}
	if _, ok := node.Labels["node-role.kubernetes.io/worker"]; ok {
		t.Error("a kubernetes.io label the kubelet may not set reached userData")
	}
	wantTaints := []corev1.Taint{
		{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute},
		{Key: activities.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute},
	}
	if !reflect.DeepEqual(node.Spec.Taints, wantTaints) {
		t.Errorf("Node taints %v, want %v", node.Spec.Taints, wantTaints)
	}
}

func TestLaunchThrottled(t *testing.T) {
	t.Run("throttling the SDK retryer absorbs", func(t *testing.T) {
		f := newFixture(t)
		req := launchRequest("default-thr", f.option("m5.large"))
		// Every second CreateFleet is throttled: spend the first on a
		// malformed call, so Launch's call is throttled and its SDK retry
		// is not.
		if err := f.emu.SetThrottle(awsemu.ThrottleFault{EveryN: 2, Actions: []string{"CreateFleet"}}); err != nil {
			t.Fatal(err)
		}
		_, _ = f.ec2.CreateFleet(context.Background(), &ec2.CreateFleetInput{
			Type: ec2types.FleetTypeInstant, LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{},
			TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1)},
		})
		if _, err := f.provider.Launch(context.Background(), req); err != nil {
			t.Fatalf("Launch: %v", err)
		}
	})
	t.Run("throttling that outlives the retryer is Throttled", func(t *testing.T) {
		f := newFixture(t)
		req := launchRequest("default-thr", f.option("m5.large"))
		if err := f.emu.SetThrottle(throttleAll("CreateFleet")); err != nil {
			t.Fatal(err)
		}
		_, err := f.provider.Launch(context.Background(), req)
		appErr := assertUnwrappedApplicationError(t, err, activities.ThrottledErrorType, false)
		if appErr.NextRetryDelay() <= 0 {
			t.Fatalf("Throttled error carries no retry delay: %v", appErr)
		}
		if live := f.liveInstances(); len(live) != 0 {
			t.Fatalf("instances launched: %v", live)
		}
	})
}

// assertUnwrappedApplicationError checks err is the ApplicationError itself:
// Temporal reads the type and retryability only off the returned error.
func assertUnwrappedApplicationError(t *testing.T, err error, errorType string, nonRetryable bool) *temporal.ApplicationError {
	t.Helper()
	appErr, ok := err.(*temporal.ApplicationError)
	if !ok {
		t.Fatalf("error %v (%T) is not an unwrapped *temporal.ApplicationError", err, err)
	}
	if appErr.Type() != errorType || appErr.NonRetryable() != nonRetryable {
		t.Fatalf("error type %s non-retryable %v, want %s %v: %v", appErr.Type(), appErr.NonRetryable(), errorType, nonRetryable, appErr)
	}
	return appErr
}

func TestLaunchInvalidNodeClassNamesTheField(t *testing.T) {
	subnetIn := func(t *testing.T, f *fixture, zone string) string {
		out, err := f.ec2.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{
			Filters: []ec2types.Filter{{Name: aws.String("availability-zone"), Values: []string{zone}}},
		})
		if err != nil || len(out.Subnets) == 0 {
			t.Fatalf("no subnet in %s: %v", zone, err)
		}
		return aws.ToString(out.Subnets[0].SubnetId)
	}
	cases := []struct {
		name      string
		nodeClass func(t *testing.T, f *fixture) *apisv1.EC2NodeClass // nil: no such class
		options   func(f *fixture) []activities.InstanceTypeOption
		want      string
	}{
		{
			name: "missing EC2NodeClass",
			want: `EC2NodeClass "default": metadata.name: EC2NodeClass not found`,
		},
		{
			name: "rule the CRD enforces",
			nodeClass: func(*testing.T, *fixture) *apisv1.EC2NodeClass {
				return testNodeClass(func(nc *apisv1.EC2NodeClass) { nc.Spec.InstanceProfile = aws.String("profile") })
			},
			want: "spec: ",
		},
		{
			name: "subnet tags match nothing",
			nodeClass: func(*testing.T, *fixture) *apisv1.EC2NodeClass {
				return testNodeClass(func(nc *apisv1.EC2NodeClass) {
					nc.Spec.SubnetSelectorTerms = []apisv1.SubnetSelectorTerm{{Tags: map[string]string{"nope": "none"}}}
				})
			},
			want: "spec.subnetSelectorTerms: matched no subnet",
		},
		{
			name: "subnet id that does not exist",
			nodeClass: func(*testing.T, *fixture) *apisv1.EC2NodeClass {
				return testNodeClass(func(nc *apisv1.EC2NodeClass) {
					nc.Spec.SubnetSelectorTerms = []apisv1.SubnetSelectorTerm{{ID: "subnet-0000000000"}}
				})
			},
			want: "spec.subnetSelectorTerms[0].id: subnet subnet-0000000000 does not exist",
		},
		{
			name: "security group name matches nothing",
			nodeClass: func(*testing.T, *fixture) *apisv1.EC2NodeClass {
				return testNodeClass(func(nc *apisv1.EC2NodeClass) {
					nc.Spec.SecurityGroupSelectorTerms = []apisv1.SecurityGroupSelectorTerm{{Name: "no-such-group"}}
				})
			},
			want: "spec.securityGroupSelectorTerms: matched no security group",
		},
		{
			name: "AMI name matches nothing",
			nodeClass: func(*testing.T, *fixture) *apisv1.EC2NodeClass {
				return testNodeClass(func(nc *apisv1.EC2NodeClass) {
					nc.Spec.AMIFamily = aws.String(apisv1.AMIFamilyAL2023)
					nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Name: "my-golden-image-*"}}
				})
			},
			want: "spec.amiSelectorTerms: matched no image",
		},
		{
			name: "AMI id that does not exist",
			nodeClass: func(*testing.T, *fixture) *apisv1.EC2NodeClass {
				return testNodeClass(func(nc *apisv1.EC2NodeClass) {
					nc.Spec.AMIFamily = aws.String(apisv1.AMIFamilyAL2023)
					nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{ID: "ami-0000000000"}}
				})
			},
			want: "spec.amiSelectorTerms[0].id: image ami-0000000000 does not exist",
		},
		{
			name: "alias release that does not exist",
			nodeClass: func(*testing.T, *fixture) *apisv1.EC2NodeClass {
				return testNodeClass(func(nc *apisv1.EC2NodeClass) {
					nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Alias: "bottlerocket@v1.0.0"}}
				})
			},
			want: "spec.amiSelectorTerms[0].alias: no AMI matches bottlerocket@v1.0.0",
		},
		{
			name: "SSM parameter that does not exist",
			nodeClass: func(*testing.T, *fixture) *apisv1.EC2NodeClass {
				return testNodeClass(func(nc *apisv1.EC2NodeClass) {
					nc.Spec.AMIFamily = aws.String(apisv1.AMIFamilyAL2023)
					nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{SSMParameter: "/my/ami"}}
				})
			},
			want: "spec.amiSelectorTerms[0].ssmParameter: parameter /my/ami does not exist",
		},
		{
			name: "role IAM does not know",
			nodeClass: func(*testing.T, *fixture) *apisv1.EC2NodeClass {
				return testNodeClass(func(nc *apisv1.EC2NodeClass) { nc.Spec.Role = "NoSuchRole" })
			},
			want: "spec.role: IAM role NoSuchRole does not exist",
		},
		{
			name: "RAID0 on Windows",
			nodeClass: func(*testing.T, *fixture) *apisv1.EC2NodeClass {
				return testNodeClass(func(nc *apisv1.EC2NodeClass) {
					nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Alias: "windows2022@latest"}}
					nc.Spec.InstanceStorePolicy = ptrTo(apisv1.InstanceStorePolicyRAID0)
				})
			},
			want: "spec.instanceStorePolicy: RAID0 is not supported by the Windows2022 AMI family",
		},
		{
			name: "AMIs of another architecture only",
			nodeClass: func(*testing.T, *fixture) *apisv1.EC2NodeClass {
				return testNodeClass(func(nc *apisv1.EC2NodeClass) {
					nc.Spec.AMIFamily = aws.String(apisv1.AMIFamilyAL2023)
					nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Name: "amazon-eks-node-al2023-x86_64-standard-*", Owner: "amazon"}}
				})
			},
			options: func(f *fixture) []activities.InstanceTypeOption {
				return []activities.InstanceTypeOption{f.option("m6g.large")}
			},
			want: "spec.amiSelectorTerms: selects no AMI for architecture arm64",
		},
		{
			name: "no subnet where the options are offered",
			nodeClass: func(t *testing.T, f *fixture) *apisv1.EC2NodeClass {
				id := subnetIn(t, f, "us-east-1a")
				return testNodeClass(func(nc *apisv1.EC2NodeClass) {
					nc.Spec.SubnetSelectorTerms = []apisv1.SubnetSelectorTerm{{ID: id}}
				})
			},
			options: func(f *fixture) []activities.InstanceTypeOption {
				option := f.option("m5.large")
				var kept []activities.Offering
				for _, o := range option.Offerings {
					if o.Zone == "us-east-1b" {
						kept = append(kept, o)
					}
				}
				option.Offerings = kept
				return []activities.InstanceTypeOption{option}
			},
			want: "spec.subnetSelectorTerms: selects no subnet in zone us-east-1b",
		},
		{
			name: "custom userData that is not MIME",
			nodeClass: func(*testing.T, *fixture) *apisv1.EC2NodeClass {
				return testNodeClass(func(nc *apisv1.EC2NodeClass) {
					nc.Spec.UserData = aws.String("Content-Type: multipart/mixed\n\nno boundary")
				})
			},
			want: "spec.userData",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			delete(f.nodeClasses, "default")
			if tc.nodeClass != nil {
				f.nodeClasses["default"] = tc.nodeClass(t, f)
			}
			options := []activities.InstanceTypeOption{f.option("m5.large")}
			if tc.options != nil {
				options = tc.options(f)
			}
			_, err := f.provider.Launch(context.Background(), launchRequest("default-bad", options...))
			assertUnwrappedApplicationError(t, err, activities.InvalidNodeClassErrorType, true)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if live := f.liveInstances(); len(live) != 0 {
				t.Fatalf("instances launched: %v", live)
			}
		})
	}
}

func TestLaunchRejectsUnusableRequests(t *testing.T) {
	f := newFixture(t)
	valid := launchRequest("default-req", f.option("m5.large"))
	cases := []struct {
		name   string
		mutate func(*activities.LaunchRequest)
		want   string
	}{
		{name: "no options", mutate: func(r *activities.LaunchRequest) { r.Options = nil }, want: "options is empty"},
		{name: "no client token", mutate: func(r *activities.LaunchRequest) { r.ClientToken = "" }, want: "clientToken is empty"},
		{name: "no node class", mutate: func(r *activities.LaunchRequest) { r.NodeClassName = "" }, want: "nodeClassName is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := valid
			tc.mutate(&req)
			_, err := f.provider.Launch(context.Background(), req)
			assertUnwrappedApplicationError(t, err, InvalidLaunchRequestErrorType, true)
			if !strings.Contains(err.Error(), tc.want) || !IsInvalidLaunchRequest(err) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// A Custom AMI gets the class's userData verbatim: Millwright adds nothing,
// so the node joins (or not) as that userData says.
func TestLaunchCustomAMIFamilyUsesUserDataVerbatim(t *testing.T) {
	f := newFixture(t)
	f.nodeClasses["default"] = testNodeClass(func(nc *apisv1.EC2NodeClass) {
		nc.Spec.AMIFamily = aws.String(apisv1.AMIFamilyCustom)
		nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Name: "amazon-eks-node-al2023-x86_64-standard-*", Owner: "amazon"}}
		nc.Spec.UserData = aws.String("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n    - --node-labels=golden=yes\n")
	})
	resp, err := f.provider.Launch(context.Background(), launchRequest("default-custom", f.option("m5.large", activities.CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	f.emuClock.Step(time.Minute)
	f.emu.Reconcile(context.Background())
	node, ok := f.nodes.byProviderID(resp.ProviderID)
	if !ok {
		t.Fatalf("no Node registered for %s", resp.ProviderID)
	}
	if node.Labels["golden"] != "yes" {
		t.Errorf("the class's userData label is missing: %v", node.Labels)
	}
	if _, ok := node.Labels[activities.NodeClaimLabel]; ok {
		t.Errorf("Millwright's labels were added to a Custom AMI's userData: %v", node.Labels)
	}
	if len(node.Spec.Taints) != 0 {
		t.Errorf("taints %v, want none", node.Spec.Taints)
	}
}

// TestLaunchTemplateCarriesClusterTags: the templates Launch creates carry
// the tag the IAM policy conditions on (millwright.dev/cluster) and the
// kubernetes.io/cluster/<name>=owned ownership tag, as instances and volumes
// do. Launch deletes its templates once CreateFleet answers, so the template
// is made directly and read back from the emulator.
func TestLaunchTemplateCarriesClusterTags(t *testing.T) {
	f := newFixture(t)
	resolved, err := f.provider.NodeClasses.Resolve(context.Background(), testNodeClass())
	if err != nil {
		t.Fatal(err)
	}
	if len(resolved.Images) == 0 {
		t.Fatal("the NodeClass resolved no image")
	}
	req := launchRequest("default-tags", f.option("m5.large"))
	name, err := f.provider.ensureLaunchTemplate(context.Background(), req, resolved, resolved.Images[0], "")
	if err != nil {
		t.Fatalf("ensureLaunchTemplate: %v", err)
	}
	var tags map[string]string
	for _, lt := range f.emu.State().LaunchTemplates {
		if lt.Name == name {
			tags = lt.Tags
		}
	}
	if tags == nil {
		t.Fatalf("launch template %s not in the emulator", name)
	}
	want := map[string]string{
		"kubernetes.io/cluster/" + testCluster: "owned",
		"millwright.dev/cluster":               testCluster,
		"millwright.dev/ec2nodeclass":          "default",
		"millwright.dev/nodeclaim":             "default-tags",
		"team":                                 "platform", // the class's own tags
	}
	if !reflect.DeepEqual(tags, want) {
		t.Fatalf("launch template tags %v, want %v", tags, want)
	}
}

func TestLaunchResponseCarriesTheOfferingsLabels(t *testing.T) {
	f := newFixture(t)
	resp, err := f.provider.Launch(context.Background(),
		launchRequest("default-labels", f.option("m5.large", activities.CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"node.kubernetes.io/instance-type":      "m5.large",
		"kubernetes.io/arch":                    "amd64",
		"millwright.dev/instance-family":        "m5",
		"karpenter.k8s.aws/instance-family":     "m5",
		"millwright.dev/instance-size":          "large",
		"millwright.dev/instance-cpu":           "2",
		"karpenter.k8s.aws/instance-cpu":        "2",
		"millwright.dev/instance-memory":        "8192",
		"millwright.dev/capacity-type":          "on-demand",
		"karpenter.sh/capacity-type":            "on-demand",
		"millwright.dev/instance-generation":    "5",
		"karpenter.k8s.aws/instance-generation": "5",
	}
	for k, v := range want {
		if got, ok := resp.Labels[k]; !ok || got != v {
			t.Errorf("label %s = %q (set %v), want %q", k, got, ok, v)
		}
	}
	if _, ok := resp.Labels["millwright.dev/instance-gpu-count"]; ok {
		t.Error("an m5.large has no GPU label")
	}
}

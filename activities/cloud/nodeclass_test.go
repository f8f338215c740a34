package cloud

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/awsemu"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

func TestResolveNodeClass(t *testing.T) {
	f := newFixture(t)
	resolved, err := f.provider.NodeClasses.Resolve(context.Background(), testNodeClass())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(resolved.Zones(), ","); got != "us-east-1a,us-east-1b,us-east-1c" {
		t.Errorf("zones %s, want the emulator's three", got)
	}
	if len(resolved.SecurityGroups) != 1 || resolved.SecurityGroups[0].Name != "millwright-node" {
		t.Errorf("security groups %v, want the tagged node group only", resolved.SecurityGroups)
	}
	if resolved.InstanceProfile != f.provider.InstanceProfiles.Name("default") || resolved.AMIFamily != apisv1.AMIFamilyAL2023 {
		t.Errorf("profile %q family %q", resolved.InstanceProfile, resolved.AMIFamily)
	}
	// The emulator publishes two releases; the newer one is selected for
	// each architecture and variant it has.
	kinds := map[string]string{}
	for _, im := range resolved.Images {
		kinds[im.Arch+"/"+im.Variant] = im.Name
	}
	for _, kind := range []string{"amd64/standard", "arm64/standard", "amd64/nvidia", "amd64/neuron"} {
		if !strings.HasSuffix(kinds[kind], "-v20261101") {
			t.Errorf("%s image %q, want the v20261101 release", kind, kinds[kind])
		}
	}
	if len(resolved.Images) != 4 {
		t.Errorf("images %v, want 4", resolved.Images)
	}
	cases := []struct {
		instanceType string
		want         string // arch/variant, "" for none
	}{
		{"m5.large", "amd64/standard"},
		{"m6g.large", "arm64/standard"},
		{"g4dn.xlarge", "amd64/nvidia"},
		{"g5g.xlarge", ""}, // arm64 NVIDIA: the emulator publishes no arm64 nvidia AMI
		{"inf2.xlarge", "amd64/neuron"},
	}
	for _, tc := range cases {
		im, ok := resolved.ImageFor(catalogSpec(t, tc.instanceType))
		got := ""
		if ok {
			got = im.Arch + "/" + im.Variant
		}
		if got != tc.want {
			t.Errorf("ImageFor(%s) = %q, want %q", tc.instanceType, got, tc.want)
		}
	}
}

func TestResolveNodeClassSelectorKinds(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*apisv1.EC2NodeClass)
		check  func(t *testing.T, r *ResolvedNodeClass)
	}{
		{
			name: "security group by name",
			mutate: func(nc *apisv1.EC2NodeClass) {
				nc.Spec.SecurityGroupSelectorTerms = []apisv1.SecurityGroupSelectorTerm{{Name: "default"}}
			},
			check: func(t *testing.T, r *ResolvedNodeClass) {
				if len(r.SecurityGroups) != 1 || r.SecurityGroups[0].Name != "default" {
					t.Errorf("security groups %v", r.SecurityGroups)
				}
			},
		},
		{
			name: "tag wildcard value",
			mutate: func(nc *apisv1.EC2NodeClass) {
				nc.Spec.SubnetSelectorTerms = []apisv1.SubnetSelectorTerm{{Tags: map[string]string{discoveryTagKey: "*"}}}
			},
			check: func(t *testing.T, r *ResolvedNodeClass) {
				if len(r.Subnets) != 3 {
					t.Errorf("subnets %v", r.Subnets)
				}
			},
		},
		{
			name: "AMI by name and owner, newest per arch",
			mutate: func(nc *apisv1.EC2NodeClass) {
				nc.Spec.AMIFamily = aws.String(apisv1.AMIFamilyAL2023)
				nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Name: "amazon-eks-node-al2023-*-standard-*", Owner: "amazon"}}
			},
			check: func(t *testing.T, r *ResolvedNodeClass) {
				if len(r.Images) != 2 || r.Images[0].Variant != "" {
					t.Errorf("images %v, want one per architecture", r.Images)
				}
			},
		},
		{
			name: "AMI by tags",
			mutate: func(nc *apisv1.EC2NodeClass) {
				nc.Spec.AMIFamily = aws.String(apisv1.AMIFamilyCustom)
				nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Tags: map[string]string{"variant": "nvidia"}}}
			},
			check: func(t *testing.T, r *ResolvedNodeClass) {
				if len(r.Images) != 1 || !strings.Contains(r.Images[0].Name, "nvidia") {
					t.Errorf("images %v, want the newest nvidia image", r.Images)
				}
			},
		},
		{
			name:   "role ARN: the managed profile holds the role's name",
			mutate: func(nc *apisv1.EC2NodeClass) { nc.Spec.Role = "arn:aws:iam::123456789012:role/nodes/" + testRole },
			check: func(t *testing.T, r *ResolvedNodeClass) {
				if !strings.HasPrefix(r.InstanceProfile, testCluster+"_") {
					t.Errorf("profile %q", r.InstanceProfile)
				}
			},
		},
		{
			name: "instance profile given",
			mutate: func(nc *apisv1.EC2NodeClass) {
				nc.Spec.Role = ""
				nc.Spec.InstanceProfile = aws.String("ExistingProfile")
			},
			check: func(t *testing.T, r *ResolvedNodeClass) {
				if r.InstanceProfile != "ExistingProfile" {
					t.Errorf("profile %q", r.InstanceProfile)
				}
			},
		},
		{
			name: "SSM parameter",
			mutate: func(nc *apisv1.EC2NodeClass) {
				nc.Spec.AMIFamily = aws.String(apisv1.AMIFamilyAL2023)
				nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{SSMParameter: "/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/arm64/standard/recommended/image_id"}}
			},
			check: func(t *testing.T, r *ResolvedNodeClass) {
				if len(r.Images) != 1 || r.Images[0].Name != "amazon-eks-node-al2023-arm64-standard-1.37-v20261101" {
					t.Errorf("images %v", r.Images)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			resolved, err := f.provider.NodeClasses.Resolve(context.Background(), testNodeClass(tc.mutate))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, resolved)
		})
	}
}

func TestResolveNodeClassIsCached(t *testing.T) {
	f := newFixture(t)
	nc := testNodeClass()
	if _, err := f.provider.NodeClasses.Resolve(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	if err := f.emu.SetThrottle(awsemu.ThrottleFault{EveryN: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.provider.NodeClasses.Resolve(context.Background(), nc); err != nil {
		t.Fatalf("cached resolution called EC2: %v", err)
	}
	f.clock.Step(DefaultNodeClassTTL + time.Second)
	_, err := f.provider.NodeClasses.Resolve(context.Background(), nc)
	if err == nil {
		t.Fatal("resolution after the TTL did not ask EC2")
	}
	if !isThrottle(err) {
		t.Fatalf("error %v is not throttling", err)
	}
	// Through an activity it is the contract's Throttled error.
	if !activities.IsThrottled(asActivityError(context.Background(), "resolve", err)) {
		t.Fatal("throttling is not reported as Throttled")
	}
}

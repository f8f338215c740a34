package awsemu

import (
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/millwright/millwright/model/catalog"
)

// fleetRequest builds the CreateFleet call the product makes: one template,
// overrides of instance types × subnets, one instance.
type fleetRequest struct {
	template     string
	types        []string
	zones        []string
	capacityType string
	token        string
	tags         map[string]string
}

func (h *harness) fleetInput(r fleetRequest) *ec2.CreateFleetInput {
	subnets := h.subnets()
	var overrides []ec2types.FleetLaunchTemplateOverridesRequest
	for _, it := range r.types {
		for _, z := range r.zones {
			overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType: ec2types.InstanceType(it), SubnetId: aws.String(subnets[z]),
			})
		}
	}
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(r.template), Version: aws.String("$Latest")},
			Overrides:                   overrides,
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(r.capacityType),
		},
		SpotOptions:     &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
		OnDemandOptions: &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
	}
	if r.token != "" {
		in.ClientToken = aws.String(r.token)
	}
	if len(r.tags) > 0 {
		in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: sdkTags(r.tags)}}
	}
	return in
}

type pool struct{ instanceType, zone string }

// expectedPool computes what an allocation strategy should pick, from the
// emulator's published prices and capacity scores.
func expectedPool(w *world, types, zones []string, capacityType string, excluded map[pool]bool) pool {
	cat := catalog.MustDefault()
	var pools []pool
	for _, it := range types {
		for _, z := range zones {
			if !excluded[pool{it, z}] {
				pools = append(pools, pool{it, z})
			}
		}
	}
	price := func(p pool) float64 {
		spec, _ := cat.Get(p.instanceType)
		return w.poolPrice(spec, p.zone, capacityType)
	}
	deep := func(p pool) bool { return w.spotCapacityScore(p.instanceType, p.zone) >= 6 }
	sort.SliceStable(pools, func(i, j int) bool {
		if capacityType == capacitySpot && deep(pools[i]) != deep(pools[j]) {
			return deep(pools[i])
		}
		return price(pools[i]) < price(pools[j])
	})
	return pools[0]
}

func TestCreateFleetAllocation(t *testing.T) {
	types := []string{"m5.large", "m5a.large", "m6i.large", "c5.xlarge"}
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	tests := []struct {
		name         string
		capacityType string
		ice          []CapacityFault
		wantErrors   int // ICE errors in the response
	}{
		{name: "spot price-capacity-optimized", capacityType: capacitySpot},
		{name: "on-demand lowest-price", capacityType: capacityOnDemand},
		{name: "spot falls back past an exhausted pool", capacityType: capacitySpot, wantErrors: 1},
		{name: "on-demand falls back past an exhausted pool", capacityType: capacityOnDemand, wantErrors: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			lt := h.launchTemplate("fleet", "x86_64", "")
			excluded := map[pool]bool{}
			if tc.wantErrors > 0 {
				// Exhaust exactly the pool the strategy would pick first.
				first := expectedPool(h.emu.world, types, zones, tc.capacityType, nil)
				if err := h.admin.AddCapacityFault(h.ctx, CapacityFault{InstanceType: first.instanceType, Zone: first.zone, CapacityType: tc.capacityType}); err != nil {
					t.Fatal(err)
				}
				excluded[first] = true
			}
			want := expectedPool(h.emu.world, types, zones, tc.capacityType, excluded)

			out, err := h.ec2.CreateFleet(h.ctx, h.fleetInput(fleetRequest{template: lt, types: types, zones: zones, capacityType: tc.capacityType,
				tags: map[string]string{"millwright.dev/nodepool": "default"}}))
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Errors) != tc.wantErrors {
				t.Fatalf("errors %+v, want %d", out.Errors, tc.wantErrors)
			}
			for _, fe := range out.Errors {
				if aws.ToString(fe.ErrorCode) != "InsufficientInstanceCapacity" || string(fe.Lifecycle) != tc.capacityType {
					t.Errorf("fleet error %s (%s)", aws.ToString(fe.ErrorCode), fe.Lifecycle)
				}
			}
			if len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != 1 {
				t.Fatalf("instances %+v, want one", out.Instances)
			}
			group := out.Instances[0]
			if string(group.Lifecycle) != tc.capacityType {
				t.Errorf("lifecycle %q, want %q", group.Lifecycle, tc.capacityType)
			}
			inst := h.instance(group.InstanceIds[0])
			got := pool{string(inst.InstanceType), aws.ToString(inst.Placement.AvailabilityZone)}
			if got != want {
				t.Errorf("launched %v, want %v", got, want)
			}
			if o := group.LaunchTemplateAndOverrides.Overrides; string(o.InstanceType) != want.instanceType || aws.ToString(o.AvailabilityZone) != want.zone {
				t.Errorf("overrides in the answer: %s/%s", o.InstanceType, aws.ToString(o.AvailabilityZone))
			}
			if (inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot) != (tc.capacityType == capacitySpot) {
				t.Errorf("instance lifecycle %q for %s", inst.InstanceLifecycle, tc.capacityType)
			}
			tags := map[string]string{}
			for _, tag := range inst.Tags {
				tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
			}
			if tags["millwright.dev/nodepool"] != "default" || tags["aws:ec2:fleet-id"] != aws.ToString(out.FleetId) {
				t.Errorf("instance tags %v", tags)
			}
		})
	}
}

func TestCreateFleetAllPoolsExhausted(t *testing.T) {
	h := newHarness(t)
	lt := h.launchTemplate("fleet", "x86_64", "")
	if err := h.emu.AddCapacityFault(CapacityFault{InstanceType: "m5.large", CapacityType: capacitySpot}); err != nil {
		t.Fatal(err)
	}
	out, err := h.ec2.CreateFleet(h.ctx, h.fleetInput(fleetRequest{template: lt, types: []string{"m5.large"},
		zones: []string{"us-east-1a", "us-east-1b", "us-east-1c"}, capacityType: capacitySpot}))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 0 {
		t.Errorf("instances launched into exhausted pools: %+v", out.Instances)
	}
	zones := map[string]bool{}
	for _, fe := range out.Errors {
		if aws.ToString(fe.ErrorCode) != "InsufficientInstanceCapacity" || fe.LaunchTemplateAndOverrides == nil {
			t.Fatalf("fleet error %+v", fe)
		}
		o := fe.LaunchTemplateAndOverrides.Overrides
		if string(o.InstanceType) != "m5.large" || !strings.Contains(aws.ToString(fe.ErrorMessage), "m5.large") {
			t.Errorf("error about %s: %s", o.InstanceType, aws.ToString(fe.ErrorMessage))
		}
		zones[aws.ToString(o.AvailabilityZone)] = true
	}
	if len(zones) != 3 {
		t.Errorf("one error per override expected, got zones %v", zones)
	}
	if live := h.emu.State().LiveInstances(); len(live) != 0 {
		t.Errorf("%d instances live", len(live))
	}
	// On-demand capacity for the same type is unaffected.
	out, err = h.ec2.CreateFleet(h.ctx, h.fleetInput(fleetRequest{template: lt, types: []string{"m5.large"}, zones: []string{"us-east-1a"}, capacityType: capacityOnDemand}))
	if err != nil || len(out.Instances) != 1 {
		t.Errorf("on-demand m5.large: %v, %+v", err, out)
	}
}

func TestCreateFleetClientToken(t *testing.T) {
	h := newHarness(t)
	lt := h.launchTemplate("fleet", "x86_64", "")
	req := fleetRequest{template: lt, types: []string{"m5.large", "m5a.large"}, zones: []string{"us-east-1a", "us-east-1b"}, capacityType: capacitySpot, token: "node/c1/default-abc-1"}
	first, err := h.ec2.CreateFleet(h.ctx, h.fleetInput(req))
	if err != nil {
		t.Fatal(err)
	}
	// The activity is retried after its first call succeeded.
	again, err := h.ec2.CreateFleet(h.ctx, h.fleetInput(req))
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(first.FleetId) != aws.ToString(again.FleetId) || first.Instances[0].InstanceIds[0] != again.Instances[0].InstanceIds[0] {
		t.Errorf("retry answered fleet %s/%v, first was %s/%v", aws.ToString(again.FleetId), again.Instances[0].InstanceIds,
			aws.ToString(first.FleetId), first.Instances[0].InstanceIds)
	}
	if live := h.emu.State().LiveInstances(); len(live) != 1 {
		t.Errorf("%d live instances after a retried launch, want 1", len(live))
	}

	other := req
	other.types = []string{"m5.large"}
	_, err = h.ec2.CreateFleet(h.ctx, h.fleetInput(other))
	if code := apiErrorCode(t, err); code != "IdempotentParameterMismatch" {
		t.Errorf("same token, other overrides: %q, want IdempotentParameterMismatch", code)
	}
	other = req
	other.token = "node/c1/default-abc-2"
	if out, err := h.ec2.CreateFleet(h.ctx, h.fleetInput(other)); err != nil || aws.ToString(out.FleetId) == aws.ToString(first.FleetId) {
		t.Errorf("a new token must launch anew: %v", err)
	}
}

func TestCreateFleetReportsBadOverrides(t *testing.T) {
	h := newHarness(t)
	lt := h.launchTemplate("arm-fleet", "arm64", "")
	in := h.fleetInput(fleetRequest{template: lt, types: []string{"m6g.large", "m5.large"}, zones: []string{"us-east-1a"}, capacityType: capacityOnDemand})
	in.LaunchTemplateConfigs = append(in.LaunchTemplateConfigs, ec2types.FleetLaunchTemplateConfigRequest{
		LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("missing"), Version: aws.String("$Latest")},
		Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "c5.large"}},
	})
	out, err := h.ec2.CreateFleet(h.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	for _, fe := range out.Errors {
		codes[string(fe.LaunchTemplateAndOverrides.Overrides.InstanceType)] = aws.ToString(fe.ErrorCode)
	}
	if codes["m5.large"] != "InvalidParameterValue" || codes["c5.large"] != "InvalidLaunchTemplateName.NotFoundException" || len(codes) != 2 {
		t.Errorf("errors by type %v", codes)
	}
	if len(out.Instances) != 1 || out.Instances[0].InstanceType != "m6g.large" {
		t.Errorf("instances %+v, want one m6g.large", out.Instances)
	}
}

func TestRunInstancesInsufficientCapacity(t *testing.T) {
	h := newHarness(t)
	if err := h.emu.AddCapacityFault(CapacityFault{InstanceType: "m5.large", Zone: "us-east-1a"}); err != nil {
		t.Fatal(err)
	}
	_, err := h.ec2.RunInstances(h.ctx, &ec2.RunInstancesInput{
		ImageId: aws.String(h.image("x86_64")), InstanceType: "m5.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-east-1a")},
	})
	if code := apiErrorCode(t, err); code != "InsufficientInstanceCapacity" || !strings.Contains(err.Error(), "us-east-1b, us-east-1c") {
		t.Errorf("error %v", err)
	}
	if !h.emu.RemoveCapacityFault(CapacityFault{InstanceType: "m5.large", Zone: "us-east-1a"}) {
		t.Fatal("fault not found")
	}
	h.runOne("m5.large", nil)
}

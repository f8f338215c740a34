package cloud

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/events"
)

// An offering EC2 keeps rejecting is kept out for longer each time, up to a
// cap, and starts again from the shortest backoff once it has been quiet.
func TestRejectedOfferingsBackOffExponentially(t *testing.T) {
	clock := clocktesting.NewFakeClock(testStart)
	u := NewUnavailableOfferings(clock, zap.NewNop())
	key := activities.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: activities.CapacityTypeSpot}
	for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 30 * time.Minute, 30 * time.Minute} {
		until, backoff := u.MarkRejected(key, "InvalidParameterValue")
		if backoff != want || !until.Equal(clock.Now().Add(want)) {
			t.Fatalf("rejection %d: backoff %s until %s, want %s", i+1, backoff, until.Sub(clock.Now()), want)
		}
		if !u.IsUnavailable(key) {
			t.Fatalf("rejection %d: offering still available", i+1)
		}
		clock.Step(backoff - time.Second)
		if !u.IsUnavailable(key) {
			t.Fatalf("rejection %d: available again before its backoff passed", i+1)
		}
		clock.Step(2 * time.Second)
		if u.IsUnavailable(key) {
			t.Fatalf("rejection %d: still unavailable after its backoff", i+1)
		}
	}
	clock.Step(rejectionMemory)
	if _, backoff := u.MarkRejected(key, "InvalidParameterValue"); backoff != RejectionBackoff {
		t.Errorf("after a quiet hour: backoff %s, want %s again", backoff, RejectionBackoff)
	}
}

// A rejection does not shorten a longer unavailability already recorded.
func TestRejectionKeepsALongerUnavailability(t *testing.T) {
	clock := clocktesting.NewFakeClock(testStart)
	u := NewUnavailableOfferings(clock, zap.NewNop())
	u.ttl = time.Hour
	key := activities.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: activities.CapacityTypeSpot}
	u.MarkUnavailable(key, "InsufficientInstanceCapacity")
	if until, _ := u.MarkRejected(key, "InvalidParameterValue"); !until.Equal(testStart.Add(time.Hour)) {
		t.Errorf("until %s, want the hour of the capacity error", until.Sub(testStart))
	}
}

type capturedEvents struct{ published []events.Event }

func (c *capturedEvents) Publish(e ...events.Event) { c.published = append(c.published, e...) }

// A launch EC2 rejects for a reason other than capacity names the rejected
// offerings with their backoff (the node workflow tells the provisioner),
// keeps them out of this worker's plans, and warns on the NodePool.
func TestRejectedLaunchBacksOffTheOffering(t *testing.T) {
	clock := clocktesting.NewFakeClock(testStart)
	recorded := &capturedEvents{}
	p := &Provider{Unavailable: NewUnavailableOfferings(clock, zap.NewNop()), log: zap.NewNop(), events: recorded, clock: clock}
	rejected := activities.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: activities.CapacityTypeOnDemand}
	other := activities.OfferingKey{InstanceType: "m5.xlarge", Zone: "us-east-1a", CapacityType: activities.CapacityTypeOnDemand}
	plan := &fleetPlan{capacityType: activities.CapacityTypeOnDemand, offered: []activities.OfferingKey{rejected, other}, zoneOfSubnet: map[string]string{}}
	out := fleetOutputWithError("InvalidParameterValue", "The security group does not exist", rejected)
	req := activities.LaunchRequest{NodeClaimName: "default-abc", NodePool: "default"}

	for _, backoff := range []time.Duration{time.Minute, 2 * time.Minute} {
		_, err := p.launchResult(context.Background(), req, plan, out)
		got, ok := activities.LaunchRejectedOfferings(err)
		want := []activities.UnavailableOffering{{OfferingKey: rejected, Until: clock.Now().Add(backoff)}}
		if !ok || len(got) != 1 || got[0].OfferingKey != want[0].OfferingKey || !got[0].Until.Equal(want[0].Until) {
			t.Fatalf("error %v names %+v, want %+v", err, got, want)
		}
		if !p.Unavailable.IsUnavailable(rejected) || p.Unavailable.IsUnavailable(other) {
			t.Errorf("unavailable: rejected %v, other %v; want only the rejected offering", p.Unavailable.IsUnavailable(rejected), p.Unavailable.IsUnavailable(other))
		}
		clock.Step(backoff)
	}
	if len(recorded.published) != 2 || recorded.published[0].Reason != events.FailedLaunch || recorded.published[0].Type != "Warning" {
		t.Fatalf("events %+v, want two FailedLaunch warnings", recorded.published)
	}
	if ref, ok := recorded.published[0].InvolvedObject.(*corev1.ObjectReference); !ok || ref.Kind != "NodePool" || ref.Name != "default" {
		t.Errorf("event on %+v, want NodePool default", recorded.published[0].InvolvedObject)
	}
}

func fleetOutputWithError(code, message string, key activities.OfferingKey) *ec2.CreateFleetOutput {
	return &ec2.CreateFleetOutput{Errors: []ec2types.CreateFleetError{{
		ErrorCode: aws.String(code), ErrorMessage: aws.String(message), Lifecycle: ec2types.InstanceLifecycle(key.CapacityType),
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
			InstanceType: ec2types.InstanceType(key.InstanceType), AvailabilityZone: aws.String(key.Zone),
		}},
	}}}
}

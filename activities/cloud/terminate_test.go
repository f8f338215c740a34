package cloud

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/millwright/millwright/activities"
)

func (f *fixture) launchOne(nodeClaim string) activities.LaunchResponse {
	f.t.Helper()
	resp, err := f.provider.Launch(context.Background(), launchRequest(nodeClaim, f.option("m5.large", activities.CapacityTypeOnDemand)))
	if err != nil {
		f.t.Fatal(err)
	}
	return resp
}

func TestTerminateInstanceIsIdempotent(t *testing.T) {
	f := newFixture(t)
	launched := f.launchOne("default-term")
	cases := []struct {
		name       string
		instanceID string
		wantStates []string
	}{
		{name: "live instance", instanceID: launched.InstanceID, wantStates: []string{"shutting-down"}},
		{name: "already terminating", instanceID: launched.InstanceID, wantStates: []string{"shutting-down", "terminated"}},
		{name: "unknown instance", instanceID: "i-0123456789abcdef0", wantStates: []string{"terminated"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := f.provider.TerminateInstance(context.Background(), activities.TerminateInstanceRequest{InstanceID: tc.instanceID})
			if err != nil {
				t.Fatalf("TerminateInstance: %v", err)
			}
			ok := false
			for _, s := range tc.wantStates {
				ok = ok || resp.State == s
			}
			if !ok {
				t.Fatalf("state %q, want one of %v", resp.State, tc.wantStates)
			}
		})
	}
	// Once terminated for good, terminating again still succeeds.
	f.emuClock.Step(time.Minute)
	f.emu.Reconcile(context.Background())
	resp, err := f.provider.TerminateInstance(context.Background(), activities.TerminateInstanceRequest{InstanceID: launched.InstanceID})
	if err != nil || resp.State != "terminated" {
		t.Fatalf("terminating a terminated instance: %v, state %q", err, resp.State)
	}
	if live := f.liveInstances(); len(live) != 0 {
		t.Fatalf("live instances after termination: %v", live)
	}
}

func TestTerminateInstanceRejectsMalformedID(t *testing.T) {
	f := newFixture(t)
	_, err := f.provider.TerminateInstance(context.Background(), activities.TerminateInstanceRequest{InstanceID: "not-an-instance"})
	assertUnwrappedApplicationError(t, err, InvalidInstanceIDErrorType, true)
}

// newActivityEnvironment runs the provider's activities as Temporal would,
// recording the heartbeats they send.
func newActivityEnvironment(t *testing.T, f *fixture) (*testsuite.TestActivityEnvironment, func() []string) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(f.provider.WaitForInstanceTerminated, activity.RegisterOptions{Name: activities.WaitForInstanceTerminatedActivity})
	var mu sync.Mutex
	var beats []string
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var state string
		if details.HasValues() {
			if err := details.Get(&state); err != nil {
				t.Errorf("heartbeat details: %v", err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		beats = append(beats, state)
	})
	return env, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), beats...)
	}
}

func TestWaitForInstanceTerminated(t *testing.T) {
	f := newFixture(t)
	launched := f.launchOne("default-wait")
	env, heartbeats := newActivityEnvironment(t, f)

	// Terminate once the activity is waiting for its next poll, then let
	// the poll interval pass on the provider's clock.
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(30 * time.Second)
		for !f.clock.HasWaiters() {
			if time.Now().After(deadline) {
				t.Error("WaitForInstanceTerminated never waited on the clock")
				return
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := f.ec2.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{launched.InstanceID}}); err != nil {
			t.Error(err)
		}
		f.clock.Step(DefaultTerminationPollInterval)
	}()
	value, err := env.ExecuteActivity(activities.WaitForInstanceTerminatedActivity, activities.WaitForInstanceTerminatedRequest{InstanceID: launched.InstanceID})
	<-done
	if err != nil {
		t.Fatalf("WaitForInstanceTerminated: %v", err)
	}
	var resp activities.WaitForInstanceTerminatedResponse
	if err := value.Get(&resp); err != nil {
		t.Fatal(err)
	}
	if resp.State != "shutting-down" {
		t.Fatalf("state %q, want shutting-down", resp.State)
	}
	if beats := heartbeats(); len(beats) != 1 || beats[0] != "pending" {
		t.Fatalf("heartbeats %v, want one with the pending state", beats)
	}
}

func TestWaitForInstanceTerminatedDoneAtOnce(t *testing.T) {
	cases := []struct {
		name      string
		prepare   func(f *fixture) string
		wantState string
	}{
		{
			name: "shutting down",
			prepare: func(f *fixture) string {
				id := f.launchOne("default-sd").InstanceID
				if _, err := f.provider.TerminateInstance(context.Background(), activities.TerminateInstanceRequest{InstanceID: id}); err != nil {
					f.t.Fatal(err)
				}
				return id
			},
			wantState: "shutting-down",
		},
		{
			name:      "unknown to EC2",
			prepare:   func(*fixture) string { return "i-0123456789abcdef0" },
			wantState: "terminated",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			id := tc.prepare(f)
			env, heartbeats := newActivityEnvironment(t, f)
			value, err := env.ExecuteActivity(activities.WaitForInstanceTerminatedActivity, activities.WaitForInstanceTerminatedRequest{InstanceID: id})
			if err != nil {
				t.Fatal(err)
			}
			var resp activities.WaitForInstanceTerminatedResponse
			if err := value.Get(&resp); err != nil {
				t.Fatal(err)
			}
			if resp.State != tc.wantState {
				t.Fatalf("state %q, want %q", resp.State, tc.wantState)
			}
			if beats := heartbeats(); len(beats) != 0 {
				t.Fatalf("heartbeats %v, want none", beats)
			}
		})
	}
}

// The termination wait heartbeats at every poll, so its poll must fit the
// heartbeat timeout workflows give it.
func TestTerminationPollFitsTheHeartbeatTimeout(t *testing.T) {
	if DefaultTerminationPollInterval > activities.MaxHeartbeatInterval {
		t.Errorf("DefaultTerminationPollInterval %s exceeds activities.MaxHeartbeatInterval %s", DefaultTerminationPollInterval, activities.MaxHeartbeatInterval)
	}
}

// A launch whose outcome the workflow never learnt may have created an
// instance: terminating by node claim finds it by its tags, and only it.
func TestTerminateInstanceByNodeClaim(t *testing.T) {
	f := newFixture(t)
	launched := f.launchOne("default-lost")
	other := f.launchOne("default-other")
	request := activities.TerminateInstanceRequest{Cluster: testCluster, NodeClaimName: "default-lost"}

	resp, err := f.provider.TerminateInstance(context.Background(), request)
	if err != nil {
		t.Fatalf("TerminateInstance by node claim: %v", err)
	}
	want := activities.TerminatedInstance{InstanceID: launched.InstanceID, ProviderID: launched.ProviderID, Zone: launched.Zone, State: "shutting-down"}
	if len(resp.Instances) != 1 || resp.Instances[0] != want {
		t.Fatalf("terminated %+v, want [%+v]", resp.Instances, want)
	}
	f.emuClock.Step(time.Minute)
	f.emu.Reconcile(context.Background())
	if live := f.liveInstances(); len(live) != 1 || live[0].ID != other.InstanceID {
		t.Errorf("live instances %v, want only the other node claim's %s", live, other.InstanceID)
	}

	// Nothing left to find: terminating again finds nothing and succeeds.
	if resp, err := f.provider.TerminateInstance(context.Background(), request); err != nil || len(resp.Instances) != 0 {
		t.Errorf("second call: %+v, %v; want nothing found", resp.Instances, err)
	}
	_, err = f.provider.TerminateInstance(context.Background(), activities.TerminateInstanceRequest{NodeClaimName: "default-lost"})
	assertUnwrappedApplicationError(t, err, InvalidInstanceIDErrorType, true)
}

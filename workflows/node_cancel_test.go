package workflows

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/millwright/millwright/activities"
)

// cleanupCase is a node whose launch or termination is interrupted; it must
// still end with its instance terminated, confirmed gone and its Node
// deleted.
type cleanupCase struct {
	name  string
	setup func(h *harness)
	// cancelled: the workflow ends Canceled.
	cancelled bool
	reason    TerminationReason
	// terminated are the TerminateInstance requests expected, in order.
	terminated []activities.TerminateInstanceRequest
	// waited are the instances whose termination is awaited.
	waited []string
	// deletedByProviderID is the provider ID DeleteNode looks the Node up by.
	deletedByProviderID string
}

func TestInterruptedLaunchOrTerminationLeaksNothing(t *testing.T) {
	providerID := "aws:///us-east-1a/" + testInstance
	slowLaunch := func(h *harness) {
		h.env.OnActivity(activities.LaunchActivity, mock.Anything, mock.Anything).After(time.Minute).
			Return(func(ctx context.Context, req activities.LaunchRequest) (activities.LaunchResponse, error) {
				return fakeWorld{}.Launch(ctx, req)
			})
	}
	cases := []cleanupCase{
		{
			name: "cancelled during launch",
			setup: func(h *harness) {
				slowLaunch(h)
				h.at(30*time.Second, h.env.CancelWorkflow)
			},
			cancelled:           true,
			reason:              ReasonCancelled,
			terminated:          []activities.TerminateInstanceRequest{{InstanceID: testInstance}},
			waited:              []string{testInstance},
			deletedByProviderID: providerID,
		},
		{
			name: "cancelled during termination",
			setup: func(h *harness) {
				h.signal(time.Hour, SignalDrain, DrainRequest{Reason: "kernel upgrade", Requester: "alice"})
				h.env.OnActivity(activities.TerminateInstanceActivity, mock.Anything, mock.Anything).After(time.Minute).
					Return(activities.TerminateInstanceResponse{State: "shutting-down"}, nil)
				h.at(time.Hour+30*time.Second, h.env.CancelWorkflow)
			},
			cancelled:           true,
			reason:              ReasonDrained,
			terminated:          []activities.TerminateInstanceRequest{{InstanceID: testInstance}},
			waited:              []string{testInstance},
			deletedByProviderID: providerID,
		},
		{
			name:                "launch timed out after an attempt may have created the instance",
			setup:               launchNeverAnswers(activities.TerminatedInstance{InstanceID: testInstance, ProviderID: providerID, Zone: "us-east-1a", State: "shutting-down"}),
			reason:              ReasonLaunchFailed,
			terminated:          []activities.TerminateInstanceRequest{{Cluster: testCluster, NodeClaimName: testNodeClaim}},
			waited:              []string{testInstance},
			deletedByProviderID: providerID,
		},
		{
			name:       "launch timed out having created nothing",
			setup:      launchNeverAnswers(),
			reason:     ReasonLaunchFailed,
			terminated: []activities.TerminateInstanceRequest{{Cluster: testCluster, NodeClaimName: testNodeClaim}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newNodeHarness(t)
			tc.setup(h)
			h.env.ExecuteWorkflow(NodeWorkflowType, nodeSpec(), (*NodeState)(nil))
			if !h.env.IsWorkflowCompleted() {
				t.Fatal("node workflow did not complete")
			}
			err := h.env.GetWorkflowError()
			var canceled *temporal.CanceledError
			switch {
			case tc.cancelled && !errors.As(err, &canceled):
				t.Fatalf("workflow error = %v, want Canceled after cleanup", err)
			case !tc.cancelled && err != nil:
				t.Fatalf("workflow error = %v", err)
			}
			history := h.history()
			if history.Termination == nil || history.Termination.Reason != tc.reason {
				t.Errorf("termination = %+v, want reason %s", history.Termination, tc.reason)
			}
			var terminated []activities.TerminateInstanceRequest
			for _, call := range h.rec.calls(activities.TerminateInstanceActivity) {
				terminated = append(terminated, *call.(*activities.TerminateInstanceRequest))
			}
			if !slices.Equal(terminated, tc.terminated) {
				t.Errorf("TerminateInstance requests %+v, want %+v\n%s", terminated, tc.terminated, formatDecisions(history.Decisions))
			}
			var waited []string
			for _, call := range h.rec.calls(activities.WaitForInstanceTerminatedActivity) {
				waited = append(waited, call.(*activities.WaitForInstanceTerminatedRequest).InstanceID)
			}
			if !slices.Equal(waited, tc.waited) {
				t.Errorf("waited for %v to terminate, want %v", waited, tc.waited)
			}
			var deletedByProviderID []string
			for _, call := range h.rec.calls(activities.DeleteNodeActivity) {
				deletedByProviderID = append(deletedByProviderID, call.(*activities.DeleteNodeRequest).ProviderID)
			}
			if want := []string{tc.deletedByProviderID}; tc.deletedByProviderID != "" && !slices.Equal(deletedByProviderID, want) ||
				tc.deletedByProviderID == "" && len(deletedByProviderID) != 0 {
				t.Errorf("DeleteNode by provider IDs %v, want %q", deletedByProviderID, tc.deletedByProviderID)
			}
			if phases := phasesOf(history); len(phases) == 0 || phases[len(phases)-1] != PhaseTerminated {
				t.Errorf("phases %v, want to end Terminated", phases)
			}
		})
	}
}

// launchNeverAnswers makes every launch attempt fail retryably (the first
// may have created the instance before its answer was lost) until the
// launch's schedule-to-close bound; terminating by node claim finds found.
func launchNeverAnswers(found ...activities.TerminatedInstance) func(h *harness) {
	return func(h *harness) {
		h.env.OnActivity(activities.LaunchActivity, mock.Anything, mock.Anything).
			Return(activities.LaunchResponse{}, errors.New("connection reset by peer"))
		h.env.OnActivity(activities.TerminateInstanceActivity, mock.Anything, mock.Anything).
			Return(activities.TerminateInstanceResponse{State: "terminated", Instances: found}, nil)
	}
}

// The state-change event of Millwright's own TerminateInstances, arriving
// while the node waits for EC2, is not an interruption: no replacement is
// asked for and the history does not list it.
func TestOwnTerminationIsNotAnInterruption(t *testing.T) {
	h := newNodeHarness(t)
	h.signal(time.Hour, SignalDrain, DrainRequest{Reason: "kernel upgrade", Requester: "alice"})
	h.env.OnActivity(activities.WaitForInstanceTerminatedActivity, mock.Anything, mock.Anything).After(time.Minute).
		Return(activities.WaitForInstanceTerminatedResponse{State: "terminated"}, nil)
	h.signal(time.Hour+30*time.Second, SignalInterruption, Interruption{
		Kind: InterruptionStateChange, EventID: "state-change-1", EventTime: t0.Add(time.Hour), Detail: "shutting-down",
	})

	result := h.runNode(nodeSpec(), nil)

	if result.Termination.Reason != ReasonDrained {
		t.Errorf("terminated for %s, want Drained", result.Termination.Reason)
	}
	for _, replan := range h.rec.replanRequests() {
		if len(replan.DisruptedNodes) > 0 || strings.HasPrefix(replan.Reason, "interrupted") {
			t.Errorf("the node's own termination asked the provisioner for replacements: %+v", replan)
		}
	}
	history := h.history()
	if len(history.Interruptions) != 0 {
		t.Errorf("interruptions %+v, want none", history.Interruptions)
	}
	decisionAt(t, history, "Instance state change (shutting-down) while terminating the instance; not an interruption")
}

// A launch EC2 rejects for a reason other than capacity hands the rejected
// offerings, with the launcher's backoff, to the provisioner, which avoids
// them until then instead of planning the same launch again at once.
func TestRejectedLaunchBacksOffItsOfferings(t *testing.T) {
	h := newNodeHarness(t)
	key := activities.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: activities.CapacityTypeSpot}
	rejected := []activities.UnavailableOffering{{OfferingKey: key, Until: t0.Add(2 * time.Minute)}}
	h.env.OnActivity(activities.LaunchActivity, mock.Anything, mock.Anything).
		Return(activities.LaunchResponse{}, activities.NewLaunchFailedError("CreateFleet launched no instance: InvalidParameterValue", rejected))

	result := h.runNode(nodeSpec(), nil)

	if result.Termination.Reason != ReasonLaunchFailed {
		t.Fatalf("terminated for %s, want LaunchFailed", result.Termination.Reason)
	}
	var replan *ReplanRequest
	for _, r := range h.rec.replanRequests() {
		if len(r.PodKeys) > 0 {
			replan = &r
		}
	}
	if replan == nil || len(replan.UnavailableOfferings) != 1 || replan.UnavailableOfferings[0].OfferingKey != key ||
		!replan.UnavailableOfferings[0].Until.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("pods re-planned with %+v, want the rejected offering unavailable until t0+2m", replan)
	}
	if rejections := h.history().Launch.Rejected; len(rejections) != 1 || rejections[0].Reason != "rejected by EC2" {
		t.Errorf("launch record's rejections %+v", rejections)
	}
}

package workflows

import "go.temporal.io/sdk/workflow"

// Change ids of the provisioning workflow's behaviour changes. A run that
// started before a change replays its old behaviour (workflow.GetVersion
// returns DefaultVersion there); every run started after takes the new one.
// Ids are recorded in histories, so they never change once released.
const (
	// changeRetryStartsWithSameNames: a failed StartNodeWorkflows batch is
	// retried with the same node claim names and its nodes count as in
	// flight meanwhile, instead of re-planning its pods under new names.
	changeRetryStartsWithSameNames = "provisioner-retry-starts-same-names"
	// changeKeepReasonsOnFailedPlan: a failed planning batch keeps its
	// resync and reconcile reasons for the retry.
	changeKeepReasonsOnFailedPlan = "provisioner-keep-reasons-on-failed-plan"
	// changeInFlightUntilRegistration: an in-flight node is kept until its
	// launch and registration timeout have both passed, not a fixed TTL.
	changeInFlightUntilRegistration = "provisioner-in-flight-until-registration"
)

// changed reports whether this run takes change id's new behaviour.
func (p *provisioner) changed(id string) bool {
	return workflow.GetVersion(p.ctx, id, workflow.DefaultVersion, 1) == 1
}

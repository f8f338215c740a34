package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
)

// launch is the Launching phase: it creates the instance, falling back
// through the remaining options when offerings have no capacity.
func (w *nodeLifecycle) launch() Phase {
	outlivesCancel := changed(w.ctx, changeLaunchOutlivesCancel)
	options := slices.Clone(w.spec.InstanceTypeOptions)
	for {
		var launched activities.LaunchResponse
		err := w.executeStep(outlivesCancel, launchOptions(), activities.LaunchActivity, w.launchRequest(options), &launched)
		if err == nil {
			return w.launched(launched)
		}
		failed, insufficient := activities.InsufficientCapacityOfferings(err)
		if !insufficient && launchOutcomeUnknown(err) && changed(w.ctx, changeTerminateUnconfirmedLaunch) {
			return w.launchUnconfirmed(err)
		}
		if !insufficient {
			return w.launchFailed(err)
		}
		remaining := withoutOfferings(options, failed)
		if len(failed) == 0 || countOfferings(remaining) == countOfferings(options) {
			// The error named nothing we offered: treat every offering
			// offered as failed rather than retrying the same request.
			failed, remaining = offeringKeys(options), nil
		}
		w.rejectOfferings(failed, "insufficient capacity")
		if len(remaining) == 0 {
			return w.capacityExhausted()
		}
		if w.terminationRequested() {
			return PhaseTerminated
		}
		w.decide("Insufficient capacity for %s; retrying with %d remaining option(s) %s",
			joinOfferings(failed), len(remaining), optionNames(remaining, 10))
		options = remaining
	}
}

func (w *nodeLifecycle) launchRequest(options []activities.InstanceTypeOption) activities.LaunchRequest {
	return activities.LaunchRequest{
		Cluster:       w.spec.Cluster,
		NodeClaimName: w.spec.NodeClaimName,
		NodePool:      w.spec.NodePool,
		NodeClassName: w.spec.NodeClassName,
		WorkflowID:    w.workflowID,
		ClientToken:   activities.LaunchClientToken(w.workflowID, options),
		Options:       options,
		Requirements:  w.spec.Requirements,
		Labels:        w.nodeLabels(),
		Annotations:   w.spec.Annotations,
		Taints:        w.spec.Taints,
		StartupTaints: w.spec.StartupTaints,
	}
}

// nodeLabels are the launched offering's well-known labels (instance type
// and capacity type), the spec's labels and the node claim label the worker
// maps Node events with.
func (w *nodeLifecycle) nodeLabels() map[string]string {
	labels := make(map[string]string, len(w.spec.Labels)+1)
	if w.state.Instance != nil {
		for k, v := range w.state.Instance.Labels {
			labels[k] = v
		}
	}
	for k, v := range w.spec.Labels {
		labels[k] = v
	}
	labels[activities.NodeClaimLabel] = w.spec.NodeClaimName
	return labels
}

func (w *nodeLifecycle) launched(instance activities.LaunchResponse) Phase {
	w.state.Instance = &instance
	w.state.RegistrationDeadline = workflow.Now(w.ctx).Add(w.registrationTimeout())
	w.logger.Info(fmt.Sprintf("Launched instance: %s, type: %s, zone: %s, hostname: %s",
		instance.InstanceID, instance.InstanceType, instance.Zone, instance.Hostname),
		"capacityType", instance.CapacityType, "providerID", instance.ProviderID)
	w.decide("Launched %s: %s in %s (%s, $%.4f/h)", instance.InstanceID, instance.InstanceType,
		instance.Zone, instance.CapacityType, instance.PricePerHour)
	if w.terminationRequested() {
		return PhaseTerminating
	}
	return PhaseRegistering
}

// capacityExhausted ends the node: no option had capacity. The provisioner
// re-plans its pods, avoiding the offerings that just failed.
func (w *nodeLifecycle) capacityExhausted() Phase {
	until := workflow.Now(w.ctx).Add(activities.UnavailableOfferingTTL)
	unavailable := make([]activities.UnavailableOffering, 0, len(w.state.RejectedOfferings))
	for _, rejected := range w.state.RejectedOfferings {
		unavailable = append(unavailable, activities.UnavailableOffering{OfferingKey: rejected.OfferingKey, Until: until})
	}
	w.requestTermination(Termination{
		Reason:    ReasonInsufficientCapacity,
		Detail:    fmt.Sprintf("no capacity for any of the %d offering(s) of %d instance type option(s)", len(unavailable), len(w.spec.InstanceTypeOptions)),
		Requester: "ec2",
	})
	w.queueReplan(ReplanRequest{PodKeys: w.spec.PodKeys, UnavailableOfferings: unavailable, Reason: "insufficient capacity"})
	return PhaseTerminated
}

// launchFailed ends a node whose launch failed for good. An invalid NodeClass
// is not re-planned at once (it would fail the same way in a loop); the
// provisioner's resync retries once the NodeClass is fixed.
//
// Offerings EC2 rejected for another reason come back with the backoff the
// launcher gave them: the provisioner avoids them until then, instead of
// planning the same offering (and the same rejection) again at once.
func (w *nodeLifecycle) launchFailed(err error) Phase {
	w.requestTermination(Termination{Reason: ReasonLaunchFailed, Detail: err.Error()})
	rejected, _ := activities.LaunchRejectedOfferings(err)
	switch {
	case activities.IsInvalidNodeClass(err):
	case len(rejected) > 0 && changed(w.ctx, changeLaunchRejectionBackoff):
		keys := make([]activities.OfferingKey, len(rejected))
		for i, offering := range rejected {
			keys[i] = offering.OfferingKey
		}
		w.rejectOfferings(keys, "rejected by EC2")
		w.decide("EC2 rejected %s; the provisioner avoids them until their backoff ends", joinOfferings(keys))
		w.queueReplan(ReplanRequest{PodKeys: w.spec.PodKeys, UnavailableOfferings: rejected, Reason: "launch rejected"})
	default:
		w.queueReplan(ReplanRequest{PodKeys: w.spec.PodKeys, Reason: "launch failed"})
	}
	w.logger.Error("Launch failed", "error", err)
	return PhaseTerminated
}

// launchUnconfirmed handles a Launch that ended without the activity's own
// answer: an attempt may have created the instance (CreateFleet's
// ClientToken would have returned it to the next attempt), so the node is
// terminated by its tags rather than left behind; its pods are planned again.
func (w *nodeLifecycle) launchUnconfirmed(err error) Phase {
	w.state.LaunchUnconfirmed = true
	w.requestTermination(Termination{Reason: ReasonLaunchFailed, Detail: "launch did not answer: " + errorDetail(err)})
	w.queueReplan(ReplanRequest{PodKeys: w.spec.PodKeys, Reason: "launch failed"})
	w.logger.Error("Launch ended without an answer; terminating whatever it may have launched", "error", err)
	w.decide("Launch ended without an answer (%s); terminating any instance tagged for %s", errorDetail(err), w.spec.NodeClaimName)
	return PhaseTerminating
}

// launchOutcomeUnknown reports whether a Launch error leaves open whether
// an instance was created: only the activity's own non-retryable errors
// (no capacity, an invalid NodeClass or request, EC2 launching nothing)
// say that nothing was; a timeout or a cancellation says nothing.
func launchOutcomeUnknown(err error) bool {
	var appErr *temporal.ApplicationError
	return !errors.As(err, &appErr) || !appErr.NonRetryable()
}

func (w *nodeLifecycle) rejectOfferings(keys []activities.OfferingKey, reason string) {
	for _, key := range keys {
		w.state.RejectedOfferings = append(w.state.RejectedOfferings, RejectedOffering{OfferingKey: key, Reason: reason})
	}
}

func (w *nodeLifecycle) registrationTimeout() time.Duration {
	if w.spec.RegistrationTimeout > 0 {
		return w.spec.RegistrationTimeout
	}
	return activities.DefaultRegistrationTimeout
}

// withoutOfferings removes failed offerings, and options left without any.
func withoutOfferings(options []activities.InstanceTypeOption, failed []activities.OfferingKey) []activities.InstanceTypeOption {
	gone := make(map[activities.OfferingKey]bool, len(failed))
	for _, key := range failed {
		gone[key] = true
	}
	return keepOfferings(options, func(key activities.OfferingKey) bool { return !gone[key] })
}

// keepOfferings keeps, in order, the offerings keep accepts, and the
// options left with any.
func keepOfferings(options []activities.InstanceTypeOption, keep func(activities.OfferingKey) bool) []activities.InstanceTypeOption {
	var out []activities.InstanceTypeOption
	for _, option := range options {
		kept := activities.InstanceTypeOption{Name: option.Name}
		for _, offering := range option.Offerings {
			if keep(activities.OfferingKey{InstanceType: option.Name, Zone: offering.Zone, CapacityType: offering.CapacityType}) {
				kept.Offerings = append(kept.Offerings, offering)
			}
		}
		if len(kept.Offerings) > 0 {
			out = append(out, kept)
		}
	}
	return out
}

func countOfferings(options []activities.InstanceTypeOption) int {
	n := 0
	for _, option := range options {
		n += len(option.Offerings)
	}
	return n
}

func offeringKeys(options []activities.InstanceTypeOption) []activities.OfferingKey {
	var keys []activities.OfferingKey
	for _, option := range options {
		for _, offering := range option.Offerings {
			keys = append(keys, activities.OfferingKey{InstanceType: option.Name, Zone: offering.Zone, CapacityType: offering.CapacityType})
		}
	}
	return keys
}

// optionNames lists up to limit option names, like "[m5.large m5.xlarge and 3 other(s)]".
func optionNames(options []activities.InstanceTypeOption, limit int) string {
	names := make([]string, 0, min(len(options), limit))
	for i, option := range options {
		if i == limit {
			break
		}
		names = append(names, option.Name)
	}
	if extra := len(options) - limit; extra > 0 {
		return fmt.Sprintf("[%s and %d other(s)]", strings.Join(names, " "), extra)
	}
	return "[" + strings.Join(names, " ") + "]"
}

func joinOfferings(keys []activities.OfferingKey) string {
	parts := make([]string, len(keys))
	for i, key := range keys {
		parts[i] = key.String()
	}
	return strings.Join(parts, ", ")
}

package workflows

import (
	"fmt"
	"maps"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// register is the Registering phase: it waits for the instance's Node and
// adopts it. An instance whose Node never shows up is terminated.
func (w *nodeLifecycle) register() Phase {
	instance := w.state.Instance
	var registered activities.WaitForRegistrationResponse
	stopped, err := w.executeUnless(w.terminationRequested,
		w.waitOptions(workflow.Now(w.ctx), w.state.RegistrationDeadline, "wait for node registration"),
		activities.WaitForRegistrationActivity,
		activities.WaitForRegistrationRequest{
			NodeClaimName: w.spec.NodeClaimName,
			InstanceID:    instance.InstanceID,
			ProviderID:    instance.ProviderID,
			Deadline:      w.state.RegistrationDeadline,
		}, &registered)
	switch {
	case stopped:
		return PhaseTerminating
	case activities.IsRegistrationTimeout(err) || isTimeout(err):
		w.requestTermination(Termination{
			Reason: ReasonRegistrationTimeout,
			Detail: fmt.Sprintf("instance %s did not register a Node within %s", instance.InstanceID, formatDuration(w.registrationTimeout())),
		})
		return PhaseTerminating
	case err != nil:
		w.requestTermination(Termination{Reason: ReasonFailed, Detail: "waiting for registration: " + err.Error()})
		return PhaseTerminating
	}

	w.state.NodeName = registered.NodeName
	annotations := w.spec.Annotations
	if changed(w.ctx, changeDriftStamps) {
		annotations = w.nodeAnnotations()
	}
	request := activities.RegisterNodeRequest{
		NodeName:      registered.NodeName,
		NodeClaimName: w.spec.NodeClaimName,
		NodePool:      w.spec.NodePool,
		Labels:        w.nodeLabels(),
		Annotations:   annotations,
		Taints:        w.spec.Taints,
		StartupTaints: w.spec.StartupTaints,
	}
	if changed(w.ctx, changeNominatePods) {
		request.NominatePods = w.spec.PodKeys
	}
	err = w.execute(shortOptions("register node"), activities.RegisterNodeActivity, request, nil)
	if activities.IsNodeGone(err) && changed(w.ctx, changeNodeGoneLeaves) {
		w.leaveForGoneNode(registered.NodeName)
		return PhaseTerminating
	}
	if err != nil {
		w.requestTermination(Termination{Reason: ReasonFailed, Detail: "registering node " + registered.NodeName + ": " + err.Error()})
		return PhaseDraining
	}
	w.state.RegisteredAt = workflow.Now(w.ctx)
	w.logger.Info("Registered node", "node", registered.NodeName)
	w.decide("Registered node %s", registered.NodeName)
	if w.terminationRequested() {
		return PhaseDraining
	}
	return PhaseInitializing
}

// leaveForGoneNode ends a node whose Node was deleted before it could be
// adopted: a kubelet does not register its Node again, so the instance is
// useless. Its pods are re-planned now rather than when the in-flight
// capacity it stood for expires.
func (w *nodeLifecycle) leaveForGoneNode(nodeName string) {
	w.requestTermination(Termination{
		Reason:    ReasonDeleted,
		Detail:    fmt.Sprintf("the Node %s was deleted before it registered", nodeName),
		Requester: "kubernetes",
		Voluntary: true,
	})
	w.queueReplan(ReplanRequest{PodKeys: w.spec.PodKeys, Reason: "node deleted before it registered"})
}

// nodeAnnotations are the launch spec's annotations (the template's and
// the NodePool and EC2NodeClass hashes) plus what the instance was launched
// with: its AMI, subnet and security groups, the drift stamps of a Node.
func (w *nodeLifecycle) nodeAnnotations() map[string]string {
	out := maps.Clone(w.spec.Annotations)
	if out == nil {
		out = map[string]string{}
	}
	if inst := w.state.Instance; inst != nil {
		if inst.ImageID != "" {
			out[apisv1.AnnotationImageID] = inst.ImageID
		}
		if inst.SubnetID != "" {
			out[apisv1.AnnotationSubnetID] = inst.SubnetID
		}
		if len(inst.SecurityGroupIDs) > 0 {
			out[apisv1.AnnotationSecurityGroupIDs] = strings.Join(inst.SecurityGroupIDs, ",")
		}
	}
	return out
}

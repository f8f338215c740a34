package status

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities/cloud"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// Resolution is what became of an EC2NodeClass's selector terms: one of
// Invalid (the class breaks a rule of the API; not resolved), Unresolved
// (the resolver's InvalidNodeClass error naming the field that matched
// nothing or cannot be used) or Resolved.
type Resolution struct {
	Invalid    error
	Unresolved error
	Resolved   *cloud.ResolvedNodeClass
}

// nodeClassParts are the parts of a class that resolve separately, in the
// order the resolver resolves them, with the field each comes from.
var nodeClassParts = []struct {
	condition, reason string
	fields            []string
}{
	{apisv1.ConditionTypeSubnetsReady, ReasonSubnetsNotResolved, []string{"spec.subnetSelectorTerms"}},
	{apisv1.ConditionTypeSecurityGroupsReady, ReasonSecurityGroupsNotResolved, []string{"spec.securityGroupSelectorTerms"}},
	{apisv1.ConditionTypeAMIsReady, ReasonAMIsNotResolved, []string{"spec.amiSelectorTerms", "spec.amiFamily"}},
	{apisv1.ConditionTypeInstanceProfileReady, ReasonNodeClassNotResolved, []string{"spec.instanceProfile", "spec.role"}},
}

// NodeClassStatus computes an EC2NodeClass's status from its resolution.
// The lists show what the current spec resolves to, so they are empty when
// it does not resolve; the conditions say which part failed and why. The
// class's current conditions are the starting point, so an unchanged
// condition keeps its lastTransitionTime.
func NodeClassStatus(class *apisv1.EC2NodeClass, resolution Resolution, now time.Time) apisv1.EC2NodeClassStatus {
	out := apisv1.EC2NodeClassStatus{Conditions: append([]metav1.Condition(nil), class.Status.Conditions...)}
	conditions := conditionSetter{conditions: &out.Conditions, generation: class.Generation, now: now}
	if resolution.Invalid != nil {
		message := validationMessage(resolution.Invalid)
		conditions.set(apisv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, ReasonValidationFailed, message)
		for _, part := range nodeClassParts {
			conditions.set(part.condition, metav1.ConditionUnknown, ReasonValidationFailed, "not resolved: the EC2NodeClass is invalid")
		}
		conditions.setReady(apisv1.ConditionTypeValidationSucceeded)
		return out
	}
	conditions.setTrue(apisv1.ConditionTypeValidationSucceeded)
	dependents := []string{apisv1.ConditionTypeValidationSucceeded}
	for _, part := range nodeClassParts {
		dependents = append(dependents, part.condition)
	}
	if resolution.Unresolved != nil {
		message := resolutionMessage(resolution.Unresolved)
		failed, known := failedPart(class.Name, message)
		for i, part := range nodeClassParts {
			switch {
			case i == failed:
				conditions.set(part.condition, metav1.ConditionFalse, part.reason, message)
			case known:
				// The resolver stops at the first part that fails; the
				// others were not looked at (or not kept), so they are not
				// known.
				conditions.set(part.condition, metav1.ConditionUnknown, ReasonNotResolved,
					fmt.Sprintf("not resolved: resolution stopped at %s", nodeClassParts[failed].condition))
			default:
				conditions.set(part.condition, metav1.ConditionUnknown, ReasonNotResolved, "not resolved")
			}
		}
		if !known {
			conditions.set(apisv1.ConditionTypeReady, metav1.ConditionFalse, ReasonNodeClassNotResolved, message)
			return out
		}
		conditions.setReady(dependents...)
		return out
	}
	resolved := resolution.Resolved
	for _, s := range resolved.Subnets {
		out.Subnets = append(out.Subnets, apisv1.Subnet{ID: s.ID, Zone: s.Zone, ZoneID: s.ZoneID})
	}
	for _, g := range resolved.SecurityGroups {
		out.SecurityGroups = append(out.SecurityGroups, apisv1.SecurityGroup{ID: g.ID, Name: g.Name})
	}
	for _, image := range resolved.Images {
		out.AMIs = append(out.AMIs, apisv1.AMI{ID: image.ID, Name: image.Name, Deprecated: image.Deprecated, Requirements: imageRequirements(image)})
	}
	out.InstanceProfile = resolved.InstanceProfile
	for _, part := range nodeClassParts {
		conditions.setTrue(part.condition)
	}
	conditions.setReady(dependents...)
	return out
}

// failedPart is the index in nodeClassParts of the part the resolver's
// error is about, by the field it names: its messages read
// `EC2NodeClass "name": field: problem` (activities.NewInvalidNodeClassError).
func failedPart(className, message string) (int, bool) {
	field, _, _ := strings.Cut(strings.TrimPrefix(message, fmt.Sprintf("EC2NodeClass %q: ", className)), ": ")
	for i, part := range nodeClassParts {
		for _, prefix := range part.fields {
			if strings.HasPrefix(field, prefix) {
				return i, true
			}
		}
	}
	return -1, false
}

// resolutionMessage is the resolver's error as a user reads it: the
// message of its InvalidNodeClass application error, without the "(type:
// InvalidNodeClass, retryable: false)" Temporal adds to Error().
func resolutionMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}

// imageRequirements are the instance types an AMI boots, as the launcher
// chooses (cloud.ResolvedNodeClass.ImageFor): its architecture, and for an
// alias's variants NVIDIA GPUs (nvidia), Neuron accelerators (neuron) or
// neither (standard).
func imageRequirements(image cloud.Image) []corev1.NodeSelectorRequirement {
	requirements := []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{image.Arch}},
	}
	switch image.Variant {
	case "nvidia":
		requirements = append(requirements, corev1.NodeSelectorRequirement{
			Key: apisv1.LabelInstanceGPUManufacturer, Operator: corev1.NodeSelectorOpIn, Values: []string{"nvidia"}})
	case "neuron":
		requirements = append(requirements, corev1.NodeSelectorRequirement{
			Key: apisv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpExists})
	case "standard":
		requirements = append(requirements,
			corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceGPUManufacturer, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"nvidia"}},
			corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist})
	}
	return requirements
}

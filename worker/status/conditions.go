package status

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// Condition reasons this package writes. A True condition's reason is its
// own type (as Karpenter writes them); these are the reasons of False and
// Unknown ones.
const (
	ReasonValidationFailed          = "ValidationFailed"
	ReasonNodeClassNotFound         = "NodeClassNotFound"
	ReasonNodeClassNotReady         = "NodeClassNotReady"
	ReasonNodeClassTerminating      = "NodeClassTerminating"
	ReasonAwaitingReconciliation    = "AwaitingReconciliation"
	ReasonSubnetsNotResolved        = "SubnetsNotResolved"
	ReasonSecurityGroupsNotResolved = "SecurityGroupsNotResolved"
	ReasonAMIsNotResolved           = "AMIsNotResolved"
	ReasonNodeClassNotResolved      = "NodeClassNotResolved"
	// ReasonNotResolved marks a part of a class left Unknown because
	// resolution stopped at another part.
	ReasonNotResolved = "NotResolved"
)

// conditionSetter writes conditions of one object at one moment; a
// condition whose status does not change keeps its lastTransitionTime
// (meta.SetStatusCondition's rule).
type conditionSetter struct {
	conditions *[]metav1.Condition
	generation int64
	now        time.Time
}

func (s conditionSetter) set(conditionType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(s.conditions, metav1.Condition{
		Type: conditionType, Status: status, Reason: reason, Message: message,
		ObservedGeneration: s.generation, LastTransitionTime: metav1.NewTime(s.now),
	})
}

func (s conditionSetter) setTrue(conditionType string) {
	s.set(conditionType, metav1.ConditionTrue, conditionType, "")
}

// setReady sets Ready from the dependents: False when any is False (the
// reason of the first, the messages of all), Unknown when any is Unknown
// or missing, True otherwise.
func (s conditionSetter) setReady(dependents ...string) {
	var falseReason, unknownReason string
	var falseMessages, unknownMessages []string
	for _, dependent := range dependents {
		c := meta.FindStatusCondition(*s.conditions, dependent)
		switch {
		case c == nil:
			if unknownReason == "" {
				unknownReason = ReasonAwaitingReconciliation
			}
			unknownMessages = append(unknownMessages, dependent+" is not known yet")
		case c.Status == metav1.ConditionFalse:
			if falseReason == "" {
				falseReason = c.Reason
			}
			falseMessages = append(falseMessages, dependentMessage(c))
		case c.Status != metav1.ConditionTrue:
			if unknownReason == "" {
				unknownReason = c.Reason
			}
			unknownMessages = append(unknownMessages, dependentMessage(c))
		}
	}
	switch {
	case falseReason != "":
		s.set(apisv1.ConditionTypeReady, metav1.ConditionFalse, falseReason, strings.Join(falseMessages, "; "))
	case unknownReason != "":
		s.set(apisv1.ConditionTypeReady, metav1.ConditionUnknown, unknownReason, strings.Join(unknownMessages, "; "))
	default:
		s.setTrue(apisv1.ConditionTypeReady)
	}
}

func dependentMessage(c *metav1.Condition) string {
	if c.Message == "" {
		return fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason)
	}
	return fmt.Sprintf("%s=%s: %s", c.Type, c.Status, c.Message)
}

// validationMessage lists every broken rule on one line ("field: problem;
// field: problem"), for a condition message; a ValidationError's own
// Error() spreads them over lines under a heading, for logs.
func validationMessage(err error) string {
	var ve *apisv1.ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) == 0 {
		return err.Error()
	}
	lines := make([]string, 0, len(ve.Errors))
	for _, fe := range ve.Errors {
		lines = append(lines, fe.Error())
	}
	return strings.Join(lines, "; ")
}

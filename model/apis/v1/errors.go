package v1

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidationError reports every rule an object breaks. Each entry of Errors
// names its field path ("spec.template.spec.requirements[2].operator") and
// what is wrong there, so a user can act on the message alone.
// +kubebuilder:object:generate=false
type ValidationError struct {
	// Kind is NodePool or EC2NodeClass.
	Kind string
	// Name is the object's metadata.name.
	Name string
	// Errors holds one entry per broken rule, in field order.
	Errors field.ErrorList
}

// Error lists every broken rule, one per line after the heading, so a
// log line or CLI message shows all of them.
func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q is invalid: %d error(s)", e.Kind, e.Name, len(e.Errors))
	for _, fe := range e.Errors {
		b.WriteString("\n  ")
		b.WriteString(fe.Error())
	}
	return b.String()
}

// IsValidationError reports whether err is, or wraps, a *ValidationError.
func IsValidationError(err error) bool {
	var ve *ValidationError
	return errors.As(err, &ve)
}

// AsValidationError returns the *ValidationError err is or wraps.
func AsValidationError(err error) (*ValidationError, bool) {
	var ve *ValidationError
	ok := errors.As(err, &ve)
	return ve, ok
}

func validationErrorOrNil(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Kind: kind, Name: name, Errors: errs}
}

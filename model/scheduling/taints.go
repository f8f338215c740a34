package scheduling

import (
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// ErrUntoleratedTaint is wrapped by errors that name a taint a pod does not tolerate.
var ErrUntoleratedTaint = errors.New("untolerated taint")

// IsUntoleratedTaint reports whether err names an untolerated taint.
func IsUntoleratedTaint(err error) bool { return errors.Is(err, ErrUntoleratedTaint) }

// UntoleratedTaint returns the first NoSchedule or NoExecute taint that no
// toleration tolerates. PreferNoSchedule taints never block scheduling.
// Matching is corev1.Toleration.ToleratesTaint's, comparison operators on.
func UntoleratedTaint(tolerations []corev1.Toleration, taints []corev1.Taint) (corev1.Taint, bool) {
	for i := range taints {
		taint := &taints[i]
		if taint.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(logr.Discard(), taint, true) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return *taint, true
		}
	}
	return corev1.Taint{}, false
}

// Tolerates returns an error naming the first taint the tolerations do not tolerate.
func Tolerates(tolerations []corev1.Toleration, taints []corev1.Taint) error {
	if t, bad := UntoleratedTaint(tolerations, taints); bad {
		return fmt.Errorf("%w %s", ErrUntoleratedTaint, TaintString(t))
	}
	return nil
}

// TaintString renders a taint as key=value:Effect (key:Effect without value).
func TaintString(t corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

package v1

import (
	"testing"
	"time"
)

func TestDoNotDisrupt(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		annotations map[string]string
		created     time.Time
		wantKey     string
	}{
		{name: "none"},
		{name: "millwright true", annotations: map[string]string{AnnotationDoNotDisrupt: "true"}, wantKey: AnnotationDoNotDisrupt},
		{name: "karpenter true", annotations: map[string]string{AnnotationKarpenterDoNotDisrupt: "true"}, wantKey: AnnotationKarpenterDoNotDisrupt},
		{name: "false", annotations: map[string]string{AnnotationKarpenterDoNotDisrupt: "false"}},
		// consolidation_test.go "can delete nodes, considers invalid do-not-disrupt annotation format as not blocking".
		{name: "a value that is no duration does not protect", annotations: map[string]string{AnnotationKarpenterDoNotDisrupt: "invalid-format"}},
		{name: "nor does a negative duration", annotations: map[string]string{AnnotationKarpenterDoNotDisrupt: "-5m"}},
		{name: "an invalid key does not hide a valid one", annotations: map[string]string{AnnotationKarpenterDoNotDisrupt: "yes please", AnnotationDoNotDisrupt: "true"}, wantKey: AnnotationDoNotDisrupt},
		{name: "duration running", annotations: map[string]string{AnnotationDoNotDisrupt: "10m"}, created: now.Add(-time.Minute), wantKey: AnnotationDoNotDisrupt},
		{name: "duration over", annotations: map[string]string{AnnotationDoNotDisrupt: "10m"}, created: now.Add(-11 * time.Minute)},
		{name: "a false key does not hide a true one", annotations: map[string]string{AnnotationDoNotDisrupt: "false", AnnotationKarpenterDoNotDisrupt: "true"}, wantKey: AnnotationKarpenterDoNotDisrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, _, protected := DoNotDisrupt(tt.annotations, tt.created, now)
			if protected != (tt.wantKey != "") || key != tt.wantKey {
				t.Errorf("DoNotDisrupt = %v, %q; want %q", protected, key, tt.wantKey)
			}
		})
	}
}

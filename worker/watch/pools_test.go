package watch

import (
	"strings"
	"testing"

	v1 "github.com/millwright/millwright/model/apis/v1"
)

func TestUnsupportedSettings(t *testing.T) {
	tests := []struct {
		name   string
		policy v1.ConsolidationPolicy
		want   string
	}{
		{name: "WhenEmpty is acted on", policy: v1.ConsolidationPolicyWhenEmpty},
		{name: "WhenEmptyOrUnderutilized is acted on", policy: v1.ConsolidationPolicyWhenEmptyOrUnderutilized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := &v1.NodePool{Spec: v1.NodePoolSpec{Disruption: v1.Disruption{ConsolidationPolicy: tt.policy}}}
			got := UnsupportedSettings(pool)
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("UnsupportedSettings = %q, want none", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
				t.Errorf("UnsupportedSettings = %q, want one containing %q", got, tt.want)
			}
		})
	}
}

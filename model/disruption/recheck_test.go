package disruption_test

import (
	"testing"
	"time"

	"github.com/millwright/millwright/model/disruption"
)

// Result.RecheckAt is the earliest time a node held back only by
// consolidateAfter may go: not for a node that something else blocks, and
// zero when nothing waits on consolidateAfter.
func TestRecheckAtConsolidateAfter(t *testing.T) {
	tests := []struct {
		name string
		in   disruption.Input
		want time.Time
	}{
		{
			name: "the sooner of two nodes within consolidateAfter",
			in: input(pools(pool("default", consolidateAfter("5m"))),
				node("n1", "default", "c.large", lastPodEvent(now.Add(-time.Minute))),
				node("n2", "default", "c.large", lastPodEvent(now.Add(-3*time.Minute)))),
			want: now.Add(2 * time.Minute),
		},
		{
			name: "a node blocked by do-not-disrupt is not waited for",
			in: input(pools(pool("default", consolidateAfter("5m"))),
				node("n1", "default", "c.large", lastPodEvent(now.Add(-time.Minute)), annotated("karpenter.sh/do-not-disrupt", "true"))),
		},
		{
			name: "consolidateAfter passed",
			in:   input(pools(pool("default", consolidateAfter("5m"))), node("n1", "default", "c.large", lastPodEvent(now.Add(-6*time.Minute)))),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := disruption.Compute(tc.in).RecheckAt; !got.Equal(tc.want) {
				t.Errorf("RecheckAt %s, want %s", got, tc.want)
			}
		})
	}
}

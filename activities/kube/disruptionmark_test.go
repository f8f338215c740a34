package kube

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/millwright/millwright/activities"
)

// A command's marks on its candidates: the soft candidate taint
// (PreferNoSchedule) while it waits to be admitted, the disrupted taint
// (NoSchedule) once admitted; taking the soft taint off leaves the
// disrupted one, and happens on a cordoned Node too; a Node that is gone is
// skipped.
func TestMarkDisruptionCandidateTaint(t *testing.T) {
	h := newHarness(t)
	node := createNode(t, newNode("mark").withoutKwok().build())
	taints := func() []string {
		t.Helper()
		got, err := testClientset.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, taint := range got.Spec.Taints {
			if strings.HasPrefix(taint.Key, "millwright.dev/") { // not the node controller's
				out = append(out, taint.Key+":"+string(taint.Effect))
			}
		}
		slices.Sort(out)
		return out
	}
	mark := func(req activities.MarkDisruptionRequest) activities.MarkDisruptionResponse {
		t.Helper()
		req.CommandID = "disruption/c1/command-1"
		resp, err := execute[activities.MarkDisruptionResponse](h, nil, h.activities.MarkDisruption, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	soft := activities.CandidateTaintKey + ":" + string(corev1.TaintEffectPreferNoSchedule)
	hard := activities.DisruptedTaintKey + ":" + string(corev1.TaintEffectNoSchedule)

	if resp := mark(activities.MarkDisruptionRequest{NodeNames: []string{node.Name}, Disrupted: true, Candidate: true}); len(resp.Changed) != 1 {
		t.Errorf("candidate taint: %+v, want the Node changed", resp)
	}
	if got := taints(); !slices.Equal(got, []string{soft}) {
		t.Errorf("taints %v, want only %s", got, soft)
	}
	// The disrupted taint's answer says when the Node carried it (the
	// drain's confirmation window counts from then); the soft taint's not.
	if resp := mark(activities.MarkDisruptionRequest{NodeNames: []string{node.Name}, Disrupted: true, Candidate: true}); !resp.DisruptedAt.IsZero() {
		t.Errorf("candidate taint answered DisruptedAt %v, want none", resp.DisruptedAt)
	}
	if resp := mark(activities.MarkDisruptionRequest{NodeNames: []string{node.Name}, Disrupted: true}); resp.DisruptedAt.IsZero() {
		t.Errorf("disrupted taint answered %+v, want when the Node carried it", resp)
	}
	if got := taints(); !slices.Equal(got, []string{hard, soft}) {
		t.Errorf("taints %v, want %s and %s", got, soft, hard)
	}
	// The node controller writes the Node too (its not-ready taint), so
	// the cordon retries on a conflict like any other writer.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cordoned, err := testClientset.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cordoned.Spec.Unschedulable = true
		_, err = testClientset.CoreV1().Nodes().Update(t.Context(), cordoned, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	mark(activities.MarkDisruptionRequest{NodeNames: []string{node.Name}, Candidate: true})
	if got := taints(); !slices.Equal(got, []string{hard}) {
		t.Errorf("taints %v after the candidate taint came off, want only %s", got, hard)
	}
	if resp := mark(activities.MarkDisruptionRequest{NodeNames: []string{"gone-" + node.Name}, Candidate: true}); !slices.Equal(resp.Skipped, []string{"gone-" + node.Name}) {
		t.Errorf("a missing Node: %+v, want it skipped", resp)
	}
}

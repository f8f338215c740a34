package kube

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities"
)

// MarkOutliers taints exactly the Nodes named (PreferNoSchedule), takes the
// taint off the others, changes nothing when called again, and skips a Node
// that is gone.
func TestMarkOutliers(t *testing.T) {
	h := newHarness(t)
	a := createNode(t, newNode("outlier-a").withoutKwok().build())
	b := createNode(t, newNode("outlier-b").withoutKwok().build())
	c := createNode(t, newNode("outlier-c").withoutKwok().build())
	marked := func() []string {
		t.Helper()
		var out []string
		for _, name := range []string{a.Name, b.Name, c.Name} {
			node, err := testClientset.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, taint := range node.Spec.Taints {
				if taint.Key == activities.OutlierTaintKey && taint.Effect == corev1.TaintEffectPreferNoSchedule {
					out = append(out, name)
				}
			}
		}
		return out
	}
	mark := func(names ...string) activities.MarkOutliersResponse {
		t.Helper()
		resp, err := execute[activities.MarkOutliersResponse](h, nil, h.activities.MarkOutliers, activities.MarkOutliersRequest{NodeNames: names})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	if resp := mark(b.Name, a.Name); !slices.Equal(resp.Marked, []string{a.Name, b.Name}) || len(resp.Unmarked) != 0 {
		t.Errorf("first mark answered %+v, want %s and %s marked", resp, a.Name, b.Name)
	}
	if got := marked(); !slices.Equal(got, []string{a.Name, b.Name}) {
		t.Errorf("tainted %v, want %s and %s", got, a.Name, b.Name)
	}
	if resp := mark(b.Name, "outlier-gone"); len(resp.Marked) != 0 || !slices.Equal(resp.Unmarked, []string{a.Name}) {
		t.Errorf("second mark answered %+v, want only %s unmarked (the gone Node skipped)", resp, a.Name)
	}
	if got := marked(); !slices.Equal(got, []string{b.Name}) {
		t.Errorf("tainted %v, want only %s", got, b.Name)
	}
	if resp := mark(); !slices.Equal(resp.Unmarked, []string{b.Name}) {
		t.Errorf("clearing answered %+v, want %s unmarked", resp, b.Name)
	}
	if got := marked(); len(got) != 0 {
		t.Errorf("tainted %v after clearing, want none", got)
	}
}

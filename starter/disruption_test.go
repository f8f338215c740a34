package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

// The plan's node table says which nodes are outliers (consolidated first,
// tainted to keep moved pods off), before the verdict's own words.
func TestDisruptionPlanNamesOutliers(t *testing.T) {
	var out bytes.Buffer
	printDisruptionPlan(&out, workflows.DisruptionStateView{Cluster: "c1", Verdicts: []activities.DisruptionVerdict{
		{NodeName: "ip-big", NodePool: "default", Candidate: true, Outlier: true,
			Message: "consolidateAfter 30s has not passed since the last pod event (5s ago)"},
		{NodeName: "ip-small", NodePool: "default", Candidate: true},
	}})
	var big, small string
	for _, line := range strings.Split(out.String(), "\n") {
		switch {
		case strings.Contains(line, "ip-big"):
			big = line
		case strings.Contains(line, "ip-small"):
			small = line
		}
	}
	if !strings.Contains(big, "outlier, consolidated first") || !strings.Contains(big, activities.OutlierTaintKey) || !strings.Contains(big, "consolidateAfter 30s") {
		t.Errorf("outlier's line %q, want it named an outlier with its taint and its verdict", big)
	}
	if strings.Contains(small, "outlier") || strings.HasSuffix(strings.TrimSpace(small), ";") {
		t.Errorf("other node's line %q, want no outlier note", small)
	}
}

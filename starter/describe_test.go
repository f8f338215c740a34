package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

func TestDescribeFindsTheNodeByEveryName(t *testing.T) {
	f := newOperateFixture(t)
	claim := "general-cccc"
	f.startNode(f.nodeSpec(claim, func(s *activities.NodeLaunchSpec) { s.ExpireAfter = activities.After(720 * time.Hour) }))
	row := f.waitForPhase(claim, workflows.PhaseReady)

	wantText := []string{
		"Node claim:  " + claim,
		"Workflow:    " + row.WorkflowID + " (running, task queue " + f.taskQueue + ")",
		"Phase:       Ready",
		"Node:        " + cannedNodeName(claim),
		cannedInstanceID(claim) + ": m5.large in us-east-1a, spot, $0.0350/h",
		"Pods:        2",
		"expires (expireAfter)",
		"expireAfter                              fires ",
		"(in 29d)",
		"Why launched:",
		"2 pending pod(s) fit m5.large, the cheapest option",
		"For pods: shop/web-1, shop/web-2",
		"m5.large             CHOSEN: us-east-1a spot at $0.0350/h",
		"m5.xlarge            not needed: a cheaper option launched",
		"Why terminated:",
		"not terminating",
		"Decisions:",
		"Phase Ready",
	}
	tests := []struct {
		name string
		args []string
	}{
		{name: "claim with cluster", args: []string{claim, "--cluster-name", f.cluster}},
		{name: "claim without cluster", args: []string{claim}},
		{name: "node name", args: []string{cannedNodeName(claim)}},
		{name: "instance id", args: []string{cannedInstanceID(claim)}},
		{name: "workflow id", args: []string{row.WorkflowID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := f.run(append([]string{"describe"}, tt.args...)...)
			t.Logf("describe %v:\n%s", tt.args, out)
			for _, want := range wantText {
				if !strings.Contains(out, want) {
					t.Errorf("describe %v lacks %q:\n%s", tt.args, want, out)
				}
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		out := f.run("describe", claim, "--cluster-name", f.cluster, "-o", "json")
		var got nodeDescription
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if got.State.Phase != workflows.PhaseReady || got.State.NodeName != cannedNodeName(claim) || got.History.Launch.Chosen == nil ||
			got.History.Launch.Chosen.InstanceType != "m5.large" || len(got.History.Decisions) == 0 {
			t.Errorf("describe -o json = %+v", got)
		}
	})
}

func TestDescribeNamesAMissingNode(t *testing.T) {
	f := newOperateFixture(t)
	for _, args := range [][]string{
		{"describe", "nope-zzzz", "--cluster-name", f.cluster},
		{"describe", "nope-zzzz"},
		{"describe", "node/" + f.cluster + "/nope-zzzz"},
		{"drain", "nope-zzzz", "--reason", "test", "--cluster-name", f.cluster},
	} {
		_, err := f.runErr(args...)
		if !IsNodeNotFound(err) || !strings.Contains(err.Error(), `no such node "`) {
			t.Errorf("%v: error = %v, want a NodeNotFoundError", args, err)
		}
	}
}

func TestDescribeSaysWhyCheaperOptionsWereRejected(t *testing.T) {
	f := newOperateFixture(t)
	claim := "general-eeee"
	f.activities.withoutCapacity("m5.large")
	f.startNode(f.nodeSpec(claim))
	f.waitForPhase(claim, workflows.PhaseReady)

	out := f.run("describe", claim, "--cluster-name", f.cluster)
	for _, want := range []string{
		"m5.large             rejected us-east-1a/spot: insufficient capacity",
		"m5.xlarge            CHOSEN: us-east-1b on-demand at $0.1920/h",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
}

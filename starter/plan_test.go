package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const planWorkload = `{
  "name": "tiny",
  "instanceTypes": [{"name": "m5.large", "arch": "amd64", "os": "linux",
    "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
    "allocatable": {"cpu": "1930m", "memory": "7134Mi", "pods": "29"},
    "offerings": [{"zone": "us-east-1a", "capacityType": "spot", "price": 0.0391, "available": true}]}],
  "nodePools": [{"name": "default"}],
  "pods": [{"metadata": {"name": "p-0", "namespace": "default"},
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}]
}`

func runRootCommand(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestPlanCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.json")
	if err := os.WriteFile(path, []byte(planWorkload), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runRootCommand(t, "plan", "--verify", "--workload", path)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Nodes []struct {
			InstanceType string   `json:"instanceType"`
			Pods         []string `json:"pods"`
		} `json:"nodes"`
		Unschedulable []any   `json:"unschedulable"`
		TotalPrice    float64 `json:"totalPrice"`
		Seconds       float64 `json:"seconds"`
	}
	if err := json.Unmarshal([]byte(stdout), &answer); err != nil {
		t.Fatalf("stdout is not the answer JSON: %v\n%s", err, stdout)
	}
	if len(answer.Nodes) != 1 || answer.Nodes[0].InstanceType != "m5.large" || answer.Nodes[0].Pods[0] != "default/p-0" || answer.TotalPrice != 0.0391 {
		t.Fatalf("answer = %+v", answer)
	}
	if !strings.Contains(stderr, "tiny: 1 pods -> 1 nodes, $0.0391/h, 0 unschedulable") {
		t.Fatalf("summary = %q", stderr)
	}
}

func TestPlanCommandErrors(t *testing.T) {
	if _, _, err := runRootCommand(t, "plan"); err == nil || !strings.Contains(err.Error(), "--workload is required") {
		t.Fatalf("error = %v", err)
	}
	missing := filepath.Join(t.TempDir(), "nope.json")
	if _, _, err := runRootCommand(t, "plan", "--workload", missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("error = %v", err)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMigrateCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "karpenter.yaml")
	manifest := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: a\nspec:\n  template:\n    spec:\n" +
		"      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}\n      requirements: []\n"
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runRootCommand(t, "migrate", path)
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "apiVersion: millwright.dev/v1") || !strings.Contains(stdout, "group: millwright.dev") {
		t.Errorf("stdout:\n%s", stdout)
	}
	if !strings.Contains(stderr, "changed NodePool/a (document 1) apiVersion: karpenter.sh/v1 → millwright.dev/v1") {
		t.Errorf("stderr:\n%s", stderr)
	}

	unsupported := strings.Replace(manifest, "spec:\n  template:", "spec:\n  replicas: 2\n  template:", 1)
	if err := os.WriteFile(path, []byte(unsupported), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err = runRootCommand(t, "migrate", path)
	if err == nil || !strings.Contains(stderr, "unsupported NodePool/a (document 1) spec.replicas") || !strings.Contains(stdout, "replicas: 2") {
		t.Errorf("unsupported field: err %v, stderr:\n%s\nstdout:\n%s", err, stderr, stdout)
	}
	stdout, _, err = runRootCommand(t, "migrate", "--drop-unsupported", path)
	if err != nil || strings.Contains(stdout, "replicas") {
		t.Errorf("--drop-unsupported: err %v, stdout:\n%s", err, stdout)
	}
	if _, _, err := runRootCommand(t, "migrate", filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing file is not an error")
	}
}

package workflows

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
)

// TestChangeIDs keeps versions.go a readable list: every change id is a
// documented constant with a value used once.
func TestChangeIDs(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "versions.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			value := spec.(*ast.ValueSpec)
			for i, name := range value.Names {
				if value.Doc == nil || strings.TrimSpace(value.Doc.Text()) == "" {
					t.Errorf("change id %s has no comment saying what changed", name.Name)
				}
				if len(value.Values) <= i {
					t.Errorf("change id %s has no explicit value", name.Name)
					continue
				}
				literal, ok := value.Values[i].(*ast.BasicLit)
				if !ok || literal.Kind != token.STRING {
					t.Errorf("change id %s: want a string literal", name.Name)
					continue
				}
				id, _ := strconv.Unquote(literal.Value)
				if other, dup := seen[id]; dup {
					t.Errorf("change ids %s and %s share the value %q", other, name.Name, id)
				}
				seen[id] = name.Name
			}
		}
	}
}

func TestCarriedStateVersions(t *testing.T) {
	for _, version := range []int{0, 1} {
		if got := readNodeState(&NodeState{Version: version}).Version; got != nodeStateVersion {
			t.Errorf("node state version %d read as %d, want %d", version, got, nodeStateVersion)
		}
		if got := readProvisionerState(&ProvisionerState{Version: version}).Version; got != provisionerStateVersion {
			t.Errorf("provisioner state version %d read as %d, want %d", version, got, provisionerStateVersion)
		}
	}
}

// A run carrying state from a newer worker is left to a newer worker: its
// workflow task fails (a panic, which Temporal retries) instead of the
// workflow ending or acting on state it cannot read.
func TestNewerCarriedStateBlocksTheRun(t *testing.T) {
	t.Run("node", func(t *testing.T) {
		h := newNodeHarness(t)
		h.env.ExecuteWorkflow(NodeWorkflowType, nodeSpec(), &NodeState{Version: nodeStateVersion + 1, Phase: PhaseReady, CreatedAt: t0})
		assertPanicked(t, h.env.GetWorkflowError(), "node state version 2 is newer than this worker's 1")
		if calls := h.rec.calls("Drain"); len(calls) != 0 {
			t.Errorf("the node acted on state it cannot read: %v", calls)
		}
	})
	t.Run("provisioner", func(t *testing.T) {
		h := newHarness(t, ProvisionerWorkflowID(testCluster))
		h.env.ExecuteWorkflow(ProvisionerWorkflowType, ProvisionerInput{Cluster: testCluster, State: &ProvisionerState{Version: provisionerStateVersion + 1}})
		assertPanicked(t, h.env.GetWorkflowError(), "provisioner state version 2 is newer than this worker's 1")
	})
}

func assertPanicked(t *testing.T, err error, message string) {
	t.Helper()
	var panicErr *temporal.PanicError
	if !errors.As(err, &panicErr) || !strings.Contains(err.Error(), message) {
		t.Fatalf("workflow error = %v, want a panic saying %q", err, message)
	}
}

package status

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// aStored is a stored object with resourceVersion "7" and the given status
// (nil: none), as the informer cache holds it.
func aStored(status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "millwright.dev/v1", "kind": "NodePool",
		"metadata": map[string]any{"name": "default", "resourceVersion": "7"},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestStatusPatch(t *testing.T) {
	tests := []struct {
		name   string
		stored *unstructured.Unstructured
		status map[string]any
		// want is the patch as JSON; "" means no write.
		want string
	}{{
		name:   "an unchanged status is not written",
		stored: aStored(map[string]any{"nodes": int64(1), "resources": map[string]any{"cpu": "2", "nodes": "1"}}),
		status: map[string]any{"nodes": int64(1), "resources": map[string]any{"cpu": "2", "nodes": "1"}},
	}, {
		name:   "a first status is written whole, locked to the resourceVersion read",
		stored: aStored(nil),
		status: map[string]any{"nodes": int64(0), "resources": map[string]any{"nodes": "0"}},
		want:   `{"metadata":{"resourceVersion":"7"},"status":{"nodes":0,"resources":{"nodes":"0"}}}`,
	}, {
		name:   "a resource no node has any more is removed with null",
		stored: aStored(map[string]any{"nodes": int64(1), "resources": map[string]any{"cpu": "4", "nvidia.com/gpu": "1", "nodes": "1"}}),
		status: map[string]any{"nodes": int64(1), "resources": map[string]any{"cpu": "2", "nodes": "1"}},
		want:   `{"metadata":{"resourceVersion":"7"},"status":{"resources":{"cpu":"2","nvidia.com/gpu":null}}}`,
	}, {
		name:   "lists are replaced whole; a field that is gone is removed",
		stored: aStored(map[string]any{"subnets": []any{map[string]any{"id": "subnet-a"}}, "instanceProfile": "p"}),
		status: map[string]any{"subnets": []any{map[string]any{"id": "subnet-b"}}},
		want:   `{"metadata":{"resourceVersion":"7"},"status":{"instanceProfile":null,"subnets":[{"id":"subnet-b"}]}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, err := statusPatch(tt.stored, tt.status)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if patch != nil {
					t.Fatalf("patch %s, want none", patch)
				}
				return
			}
			// Compare as values: key order is not the point.
			var got, want any
			if err := json.Unmarshal(patch, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("patch %s, want %s", gotJSON, wantJSON)
			}
		})
	}
}

// TestNodePoolStatusObjectKeepsAZeroCount: an empty pool shows 0 nodes,
// not a blank column.
func TestNodePoolStatusObjectKeepsAZeroCount(t *testing.T) {
	pool, validationErr := aPool(t).build()
	object, err := nodePoolStatusObject(NodePoolStatus(pool, validationErr, nil, nil, now))
	if err != nil {
		t.Fatal(err)
	}
	if nodes, ok := object["nodes"]; !ok || nodes != int64(0) {
		t.Errorf("status.nodes = %v (present %v), want 0", nodes, ok)
	}
}

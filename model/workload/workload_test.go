package workload

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/millwright/millwright/model/packer"
)

// example is the workload of WORKLOAD.md.
const example = `{
  "name": "diverse-5000",
  "instanceTypes": [
    {
      "name": "m5.large",
      "arch": "amd64",
      "os": "linux",
      "labels": {"example.com/instance-family": "m5"},
      "capacity":    {"cpu": "2",     "memory": "8Gi",    "pods": "29", "ephemeral-storage": "20Gi"},
      "allocatable": {"cpu": "1930m", "memory": "7134Mi", "pods": "29", "ephemeral-storage": "18Gi"},
      "offerings": [
        {"zone": "us-east-1a", "capacityType": "on-demand", "price": 0.096, "available": true},
        {"zone": "us-east-1a", "capacityType": "spot",      "price": 0.0391, "available": true}
      ]
    }
  ],
  "nodePools": [
    {
      "name": "default",
      "weight": 0,
      "requirements": [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}
      ],
      "capacityTypes": ["spot", "on-demand"],
      "taints": [],
      "limits": {"cpu": "100000"}
    }
  ],
  "daemonSetPods": [ { "metadata": {"name": "ds-node-agent"}, "spec": { "containers": [ {"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}} ] } } ],
  "pods": [
    { "metadata": {"name": "p-0", "namespace": "default", "labels": {"app": "a"}},
      "spec": { "containers": [ {"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}} ] } },
    { "metadata": {"name": "p-9", "namespace": "default"},
      "spec": { "nodeSelector": {"kubernetes.io/arch": "s390x"}, "containers": [ {"name": "c", "resources": {"requests": {"cpu": "500m"}}} ] } }
  ]
}`

func TestExampleRoundTrip(t *testing.T) {
	w, err := Decode(strings.NewReader(example))
	if err != nil {
		t.Fatal(err)
	}
	in, err := w.PackerInput()
	if err != nil {
		t.Fatal(err)
	}
	r, err := packer.Pack(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := packer.Verify(in, r); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := NewAnswer(r, 0.012).Write(&buf); err != nil {
		t.Fatal(err)
	}
	// The answer has exactly WORKLOAD.md's shape.
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"nodes": []any{map[string]any{"nodePool": "default", "instanceType": "m5.large", "zone": "us-east-1a",
			"capacityType": "spot", "price": 0.0391, "pods": []any{"default/p-0"}}},
		"unschedulable": []any{map[string]any{"pod": "default/p-9", "reason": "no instance type satisfies: nodeSelector kubernetes.io/arch=s390x"}},
		"totalPrice":    0.0391,
		"seconds":       0.012,
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("answer\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if labels := r.NewNodes[0].Labels; labels["example.com/instance-family"] != "m5" || labels["karpenter.sh/nodepool"] != "default" {
		t.Errorf("node labels lack the type's or the alias labels: %v", labels)
	}
}

func TestErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name, edit, want string
	}{
		{"bad quantity", `"allocatable": {"cpu": "1930m"`, `"allocatable": {"cpu": "lots"`},
		{"no pods in allocatable", `"allocatable": {"cpu": "1930m", "memory": "7134Mi", "pods": "29"`, `"allocatable": {"cpu": "1930m", "memory": "7134Mi", "pods": "0"`},
		{"missing zone", `{"zone": "us-east-1a", "capacityType": "on-demand"`, `{"zone": "", "capacityType": "on-demand"`},
		{"bad operator", `"operator": "In"`, `"operator": "Inn"`},
		{"pod without name", `"name": "p-0"`, `"name": ""`},
	}
	wantErr := map[string]string{
		"bad quantity":           "parsing workload",
		"no pods in allocatable": "instanceTypes[0] (m5.large).allocatable: cpu, memory and pods must be positive",
		"missing zone":           "instanceTypes[0] (m5.large).offerings[0]: zone and capacityType are required",
		"bad operator":           `nodePools[0] (default): requirements[0]: requirement "kubernetes.io/arch": operator "Inn" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt`,
		"pod without name":       "pods[0].metadata.name: empty",
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(example, tc.edit, tc.want, 1)
			if src == example {
				t.Fatalf("edit %q not applied", tc.edit)
			}
			w, err := Decode(strings.NewReader(src))
			if err == nil {
				var in packer.Input
				if in, err = w.PackerInput(); err == nil {
					_, err = packer.Pack(in)
				}
			}
			if err == nil || !strings.Contains(err.Error(), wantErr[tc.name]) {
				t.Fatalf("error = %v, want it to contain %q", err, wantErr[tc.name])
			}
		})
	}
}

func TestReadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broken.json")
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil || !strings.HasPrefix(err.Error(), path+": parsing workload") {
		t.Fatalf("error = %v", err)
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Fatalf("error = %v", err)
	}
}

func TestScaled(t *testing.T) {
	w, err := Decode(strings.NewReader(example))
	if err != nil {
		t.Fatal(err)
	}
	s := w.Scaled(3)
	if len(s.Pods) != 6 || s.Pods[0].Name != "p-0-x0" || s.Pods[5].Name != "p-9-x2" || w.Pods[0].Name != "p-0" {
		t.Fatalf("scaled names: %v", []string{s.Pods[0].Name, s.Pods[5].Name, w.Pods[0].Name})
	}
	if got := w.Truncated(1); len(got.Pods) != 1 {
		t.Fatalf("Truncated(1) has %d pods", len(got.Pods))
	}
}

// The extensions for scheduling fidelity: namespaces' labels, the pods'
// volumes and minValues reach the packer, which then honours them.
func TestExtensionsReachThePacker(t *testing.T) {
	const file = `{
  "name": "extensions",
  "instanceTypes": [
    {"name": "m.small", "arch": "amd64", "capacity": {"cpu": "2", "memory": "8Gi", "pods": "10"}, "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "10"},
     "offerings": [{"zone": "a", "capacityType": "on-demand", "price": 0.1, "available": true}, {"zone": "b", "capacityType": "on-demand", "price": 0.2, "available": true}]},
    {"name": "m.large", "arch": "amd64", "capacity": {"cpu": "8", "memory": "32Gi", "pods": "40"}, "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "40"},
     "offerings": [{"zone": "a", "capacityType": "on-demand", "price": 0.4, "available": true}, {"zone": "b", "capacityType": "on-demand", "price": 0.8, "available": true}]}
  ],
  "nodePools": [{"name": "default", "minValues": {"node.kubernetes.io/instance-type": 2}}],
  "namespaces": [{"metadata": {"name": "payments", "labels": {"team": "a"}}}],
  "persistentVolumeClaims": [{"metadata": {"name": "data", "namespace": "default"}, "spec": {"volumeName": "pv-b"}}],
  "persistentVolumes": [{"metadata": {"name": "pv-b"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
     {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]}]}}}}],
  "storageClasses": [{"metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"}],
  "pods": [{"metadata": {"name": "db", "namespace": "default"}, "spec": {
     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}]
}`
	w, err := Decode(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	in, err := w.PackerInput()
	if err != nil {
		t.Fatal(err)
	}
	if in.Namespaces["payments"]["team"] != "a" || len(in.Storage.PersistentVolumes) != 1 || in.NodePools[0].MinValues["node.kubernetes.io/instance-type"] != 2 {
		t.Fatalf("extensions lost: %+v", in)
	}
	r, err := packer.Pack(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := packer.Verify(in, r); err != nil {
		t.Fatal(err)
	}
	if len(r.NewNodes) != 1 || r.NewNodes[0].Zone != "b" || len(r.NewNodes[0].Options) != 2 {
		t.Fatalf("want one node in zone b with 2 options: %+v", r)
	}
}

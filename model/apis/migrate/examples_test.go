package migrate

import (
	"io/fs"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/millwright/millwright/deploy/examples"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// knownUnsupported are the Karpenter examples that need something
// Millwright does not have yet, with what.
var knownUnsupported = map[string]string{
	"instance-store-ephemeral-storage.yaml": "the karpenter.k8s.aws/instance-local-nvme label (issue 13)",
}

// TestKarpenterExamplesMigrate: every vendored Karpenter example migrates
// into NodePools and EC2NodeClasses that decode strictly and pass
// Millwright's validation (the CRD's rules), with nothing unsupported but
// what knownUnsupported says.
func TestKarpenterExamplesMigrate(t *testing.T) {
	files, err := fs.Glob(examples.Karpenter, "karpenter/*.yaml")
	if err != nil || len(files) < 15 {
		t.Fatalf("vendored examples %v, %v", files, err)
	}
	for _, file := range files {
		name := strings.TrimPrefix(file, "karpenter/")
		t.Run(name, func(t *testing.T) {
			manifest, err := fs.ReadFile(examples.Karpenter, file)
			if err != nil {
				t.Fatal(err)
			}
			result, err := Migrate(manifest, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if unsupported := result.Unsupported(); len(unsupported) > 0 && knownUnsupported[name] == "" {
				t.Errorf("unsupported: %v", unsupported)
			}
			out := strings.NewReplacer("${CLUSTER_NAME}", "millwright", "${CLUSTER_ENDPOINT}", "https://127.0.0.1:6443").Replace(string(result.Manifest))
			for i, doc := range strings.Split(out, "\n---\n") {
				var meta struct{ Kind string }
				if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
					t.Fatalf("document %d: %v", i+1, err)
				}
				switch meta.Kind {
				case "NodePool":
					var pool apisv1.NodePool
					if err := yaml.UnmarshalStrict([]byte(doc), &pool); err != nil {
						t.Fatalf("document %d: %v", i+1, err)
					}
					if err := pool.Validate(); err != nil {
						t.Errorf("NodePool %s: %v", pool.Name, err)
					}
				case "EC2NodeClass":
					var class apisv1.EC2NodeClass
					if err := yaml.UnmarshalStrict([]byte(doc), &class); err != nil {
						t.Fatalf("document %d: %v", i+1, err)
					}
					if err := class.Validate(); err != nil {
						t.Errorf("EC2NodeClass %s: %v", class.Name, err)
					}
					if !strings.HasPrefix(class.Spec.Role, "MillwrightNodeRole-") {
						t.Errorf("EC2NodeClass %s role %q", class.Name, class.Spec.Role)
					}
				}
			}
		})
	}
}

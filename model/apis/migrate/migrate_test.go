package migrate

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

const karpenterManifest = `# A Karpenter pair
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: karpenter.sh/capacity-type # kept: Millwright honours it
          operator: In
          values: ["spot", "on-demand"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
  limits:
    cpu: 100
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: "KarpenterNodeRole-${CLUSTER_NAME}"
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: "${CLUSTER_NAME}"
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: "${CLUSTER_NAME}"
  amiSelectorTerms:
    - alias: al2023@latest
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: untouched
data:
  karpenter.sh/discovery: x
`

func TestMigrateRewritesGroupsDiscoveryAndRole(t *testing.T) {
	result, err := Migrate([]byte(karpenterManifest), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if u := result.Unsupported(); len(u) != 0 {
		t.Errorf("unsupported %v, want none", u)
	}
	out := string(result.Manifest)
	for _, want := range []string{
		"apiVersion: millwright.dev/v1\nkind: NodePool",
		"group: millwright.dev",
		"key: karpenter.sh/capacity-type # kept: Millwright honours it",
		"key: karpenter.k8s.aws/instance-category",
		"apiVersion: millwright.dev/v1\nkind: EC2NodeClass",
		`role: "MillwrightNodeRole-${CLUSTER_NAME}"`,
		`millwright.dev/discovery: "${CLUSTER_NAME}"`,
		"# A Karpenter pair",
		"karpenter.sh/discovery: x", // the ConfigMap is not ours to change
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	docs := strings.Split(out, "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3", len(docs))
	}
	var pool apisv1.NodePool
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &pool); err != nil {
		t.Fatalf("migrated NodePool: %v", err)
	}
	var class apisv1.EC2NodeClass
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &class); err != nil {
		t.Fatalf("migrated EC2NodeClass: %v", err)
	}
	var paths []string
	for _, c := range result.Changes {
		paths = append(paths, c.Kind+":"+c.Path)
	}
	for _, want := range []string{"NodePool:apiVersion", "NodePool:spec.template.spec.nodeClassRef.group", "EC2NodeClass:spec.role",
		"EC2NodeClass:spec.subnetSelectorTerms[0].tags", "EC2NodeClass:spec.securityGroupSelectorTerms[0].tags"} {
		if !strings.Contains(strings.Join(paths, ","), want) {
			t.Errorf("changes %v lack %s", paths, want)
		}
	}
}

func TestMigrateReportsUnsupported(t *testing.T) {
	manifest := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: static
spec:
  replicas: 3
  template:
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["reserved"]
        - key: karpenter.k8s.aws/instance-made-up
          operator: Gt
          values: ["100"]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-prod
  subnetSelectorTerms: [{id: subnet-1}]
  securityGroupSelectorTerms: [{id: sg-1}]
  amiSelectorTerms: [{alias: al2023@latest}]
  capacityReservationSelectorTerms: [{id: cr-1}]
  blockDeviceMappings:
    - deviceName: /dev/xvda
      ebs: {volumeSize: 20Gi, volumeInitializationRate: 200}
---
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata:
  name: old
`
	cases := []struct {
		drop     bool
		wantKept bool
	}{{drop: false, wantKept: true}, {drop: true, wantKept: false}}
	for _, tc := range cases {
		result, err := Migrate([]byte(manifest), Options{DropUnsupported: tc.drop})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range result.Unsupported() {
			got = append(got, c.Kind+"/"+c.Name+" "+c.Path)
		}
		want := []string{
			"NodePool/static spec.template.spec.requirements[0].values",
			"NodePool/static spec.template.spec.requirements[1].key",
			"NodePool/static spec.replicas",
			"EC2NodeClass/default spec.capacityReservationSelectorTerms",
			"EC2NodeClass/default spec.blockDeviceMappings[0].ebs.volumeInitializationRate",
			"NodePool/old apiVersion",
		}
		joined := strings.Join(got, "\n")
		for _, w := range want {
			if !strings.Contains(joined, w) {
				t.Errorf("drop=%v: unsupported\n%s\nlacks %s", tc.drop, joined, w)
			}
		}
		out := string(result.Manifest)
		if kept := strings.Contains(out, "capacityReservationSelectorTerms") && strings.Contains(out, "replicas: 3") && strings.Contains(out, "volumeInitializationRate"); kept != tc.wantKept {
			t.Errorf("drop=%v: unsupported fields kept = %v, want %v:\n%s", tc.drop, kept, tc.wantKept, out)
		}
	}
}

func TestMigrateRefusesBrokenYAML(t *testing.T) {
	if _, err := Migrate([]byte("apiVersion: karpenter.sh/v1\nkind: NodePool\n---\n: : :\n"), Options{}); err == nil || !strings.Contains(err.Error(), "document 2") {
		t.Errorf("error %v, want one naming document 2", err)
	}
}

package v1

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/yaml"

	"github.com/millwright/millwright/deploy/crds"
	"github.com/millwright/millwright/deploy/examples"
)

// The example manifests decode strictly into the Go types, pass Validate and
// the CRD, and say what the docs say they say.
func TestExampleManifests(t *testing.T) {
	t.Run("nodeclass.yaml", func(t *testing.T) {
		nc := &EC2NodeClass{}
		if err := yaml.UnmarshalStrict(examples.NodeClass, nc); err != nil {
			t.Fatalf("decoding: %v", err)
		}
		if err := nc.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if errs := newAPIServerSim(t, crds.EC2NodeClassFile).create(t, nc); len(errs) > 0 {
			t.Fatalf("CRD rejects it:\n%s", describe(errs))
		}
		if family, version, ok := nc.Alias(); nc.Name != "default" || !ok || family != "al2023" || version != "latest" || nc.AMIFamily() != AMIFamilyAL2023 {
			t.Errorf("want EC2NodeClass default with alias al2023@latest, got %q %v", nc.Name, nc.Spec.AMISelectorTerms)
		}
		if nc.Spec.SubnetSelectorTerms[0].Tags["millwright.dev/discovery"] == "" || nc.Spec.SecurityGroupSelectorTerms[0].Tags["millwright.dev/discovery"] == "" || nc.Spec.Role == "" {
			t.Errorf("want discovery-tag selectors and a role, got %+v", nc.Spec)
		}
		if !nc.IMDSv2Required() {
			t.Errorf("IMDSv2 must be required by default")
		}
	})
	t.Run("nodepool.yaml", func(t *testing.T) {
		np := &NodePool{}
		if err := yaml.UnmarshalStrict(examples.NodePool, np); err != nil {
			t.Fatalf("decoding: %v", err)
		}
		if err := np.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if errs := newAPIServerSim(t, crds.NodePoolFile).create(t, np); len(errs) > 0 {
			t.Fatalf("CRD rejects it:\n%s", describe(errs))
		}
		want := map[string][]string{
			corev1.LabelInstanceTypeStable: {"m5.large", "m5.2xlarge"},
			corev1.LabelTopologyZone:       {"us-east-1a", "us-east-1b"},
			corev1.LabelArchStable:         {"amd64", "arm64"},
			LabelCapacityType:              {"spot", "on-demand"},
		}
		for _, r := range np.Spec.Template.Spec.Requirements {
			if r.Operator != corev1.NodeSelectorOpIn || !equalJSON(t, r.Values, want[r.Key]) {
				t.Errorf("requirement %s %s %v, want In %v", r.Key, r.Operator, r.Values, want[r.Key])
			}
			delete(want, r.Key)
		}
		if len(want) > 0 {
			t.Errorf("missing requirements %v", want)
		}
		if after, never := np.ConsolidateAfterDuration(); never || after.String() != "30s" || np.ConsolidationPolicyOrDefault() != ConsolidationPolicyWhenEmpty {
			t.Errorf("want WhenEmpty after 30s, got %s after %v (never=%v)", np.Spec.Disruption.ConsolidationPolicy, after, never)
		}
		if cpu := np.Spec.Limits[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("1000")) != 0 {
			t.Errorf("limits.cpu = %s, want 1000", cpu.String())
		}
		if expire, never := np.ExpireAfterDuration(); never || expire.Hours() != 720 {
			t.Errorf("expireAfter = %v (never=%v), want the 720h default", expire, never)
		}
	})
}

// AddToScheme lets client-go code (and kubectl-style decoders) turn
// millwright.dev/v1 manifests into the Go types.
func TestSchemeDecodesManifests(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	for name, manifest := range map[string][]byte{"nodepool.yaml": examples.NodePool, "nodeclass.yaml": examples.NodeClass} {
		obj, gvk, err := decoder.Decode(manifest, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if gvk.GroupVersion() != GroupVersion {
			t.Errorf("%s: decoded as %s", name, gvk)
		}
		switch o := obj.(type) {
		case *NodePool:
			if gvk.Kind != "NodePool" || o.Name != "default" {
				t.Errorf("%s: got %s %q", name, gvk.Kind, o.Name)
			}
		case *EC2NodeClass:
			if gvk.Kind != "EC2NodeClass" || o.Name != "default" {
				t.Errorf("%s: got %s %q", name, gvk.Kind, o.Name)
			}
		default:
			t.Errorf("%s: decoded into %T", name, obj)
		}
	}
	for _, kind := range []string{"NodePool", "NodePoolList", "EC2NodeClass", "EC2NodeClassList"} {
		if !scheme.Recognizes(GroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not know %s", kind)
		}
	}
}

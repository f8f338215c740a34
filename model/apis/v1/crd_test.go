package v1

import (
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/millwright/millwright/deploy/crds"
)

// celRules collects every x-kubernetes-validations rule of a schema, keyed
// by the JSON path of the node it sits on.
func celRules(props *apiextensionsv1.JSONSchemaProps, path string, out map[string][]string) {
	if props == nil {
		return
	}
	for _, r := range props.XValidations {
		out[path] = append(out[path], r.Rule)
	}
	for name, child := range props.Properties {
		celRules(&child, path+"."+name, out)
	}
	if props.Items != nil {
		celRules(props.Items.Schema, path+"[]", out)
	}
	if props.AdditionalProperties != nil {
		celRules(props.AdditionalProperties.Schema, path+"{}", out)
	}
}

func TestCRDManifestsParseAndWouldBeAccepted(t *testing.T) {
	tests := []struct {
		file     string
		kind     string
		plural   string
		wantCEL  map[string][]string // node path -> substrings of rules that must be there
		wantDflt []string            // node paths that must carry a default
	}{
		{
			file: crds.NodePoolFile, kind: "NodePool", plural: "nodepools",
			wantCEL: map[string][]string{
				"":                                       {"size(self.metadata.name) <= 63"},
				".spec":                                  {"!quantity(string(self.limits['nodes'])).isLessThan(quantity('0').add(self.minNodes))"},
				".spec.limits":                           {"isLessThan(quantity('0'))"},
				".spec.disruption.budgets":               {"has(x.schedule) == has(x.duration)"},
				".spec.template.metadata.labels":         {"format.qualifiedName()", "millwright[.]dev/", "k != 'millwright.dev/nodepool'", "k != 'kubernetes.io/hostname'"},
				".spec.template.spec":                    {"self.taints.exists_one", "self.startupTaints.exists_one", "self.taints.exists(y"},
				".spec.template.spec.taints":             {"format.qualifiedName().validate(t.key)", "t.effect in"},
				".spec.template.spec.startupTaints":      {"format.qualifiedName().validate(t.key)", "t.effect in"},
				".spec.template.spec.requirements[]":     {"self.operator != 'In' || (has(self.values) && size(self.values) > 0)", "self.values[0].matches('^[0-9]{1,18}$')", "size(self.values) >= self.minValues", "v in ['spot', 'on-demand']"},
				".spec.template.spec.requirements[].key": {"format.qualifiedName().validate(self)", "millwright[.]dev/", "self != 'millwright.dev/nodepool'", "self != 'kubernetes.io/hostname'"},
				".spec.template.spec.nodeClassRef":       {"self.group == oldSelf.group", "self.kind == oldSelf.kind"},
				".spec.template.spec.nodeClassRef.name":  {"self != ''"},
			},
			wantDflt: []string{".spec.disruption", ".spec.disruption.consolidateAfter", ".spec.disruption.consolidationPolicy", ".spec.disruption.budgets", ".spec.template.spec.expireAfter"},
		},
		{
			file: crds.EC2NodeClassFile, kind: "EC2NodeClass", plural: "ec2nodeclasses",
			wantCEL: map[string][]string{
				".spec":                                  {"has(self.role) != has(self.instanceProfile)", "has(self.amiFamily)", "lowerAscii()"},
				".spec.amiSelectorTerms":                 {"self.exists(x, has(x.alias)) && self.size() != 1"},
				".spec.amiSelectorTerms[]":               {"has(self.alias) && (has(self.id)", "has(self.id) && (has(self.alias)"},
				".spec.amiSelectorTerms[].alias":         {"matches('^[a-zA-Z0-9]+@.+$')", "'al2023'", "== 'latest'"},
				".spec.subnetSelectorTerms[]":            {"has(self.tags) || has(self.id)", "!(has(self.id) && has(self.tags))"},
				".spec.securityGroupSelectorTerms[]":     {"has(self.name)"},
				".spec.tags":                             {"startsWith('kubernetes.io/cluster/')", "'millwright.dev/nodepool'", "'millwright.dev/nodeclaim'", "startsWith('aws:')"},
				".spec.kubelet":                          {"imageGCHighThresholdPercent > self.imageGCLowThresholdPercent", "e in self.evictionSoftGracePeriod"},
				".spec.blockDeviceMappings[].rootVolume": {"!self"},
				".spec.blockDeviceMappings[].ebs":        {"has(self.snapshotID) || has(self.volumeSize)"},
				".spec.role":                             {"self != ''"},
				".spec.instanceProfile":                  {"self != ''"},
			},
			wantDflt: []string{".spec.metadataOptions", ".spec.metadataOptions.httpTokens", ".spec.metadataOptions.httpPutResponseHopLimit"},
		},
		// Written by the node workflows' activities only: no rules.
		{file: crds.NodeClaimFile, kind: "NodeClaim", plural: "nodeclaims"},
	}
	if got := len(crds.All()); got != len(tests) {
		t.Errorf("deploy/crds embeds %d manifests, want %d", got, len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			crd := loadCRD(t, tt.file)
			if crd.Spec.Group != Group || crd.Spec.Names.Kind != tt.kind || crd.Spec.Names.Plural != tt.plural || crd.Name != tt.plural+"."+Group {
				t.Errorf("identity: group %q kind %q plural %q name %q", crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Names.Plural, crd.Name)
			}
			if crd.Spec.Scope != apiextensionsv1.ClusterScoped {
				t.Errorf("scope %q, want Cluster", crd.Spec.Scope)
			}
			if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != GroupVersion.Version || !crd.Spec.Versions[0].Storage || crd.Spec.Versions[0].Subresources == nil || crd.Spec.Versions[0].Subresources.Status == nil {
				t.Fatalf("versions: want exactly v1, served, stored, with a status subresource")
			}
			if errs := validateCRDDefinition(t, crd); len(errs) > 0 {
				t.Fatalf("the API server would reject the CRD:\n%s", describe(errs))
			}

			rules := map[string][]string{}
			celRules(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "", rules)
			for path, wants := range tt.wantCEL {
				for _, want := range wants {
					if !slices.ContainsFunc(rules[path], func(r string) bool { return strings.Contains(r, want) }) {
						t.Errorf("no CEL rule at %q contains %q; rules there: %q", path, want, rules[path])
					}
				}
			}
			for _, path := range tt.wantDflt {
				if node := schemaAt(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, path); node == nil || node.Default == nil {
					t.Errorf("no default at %q", path)
				}
			}
		})
	}
}

// kubectl get nodeclaims shows Karpenter's columns, in Karpenter's order;
// -o wide adds the image, instance, pool, class, phase and drift.
func TestNodeClaimPrinterColumnsAreKarpenters(t *testing.T) {
	crd := loadCRD(t, crds.NodeClaimFile)
	var names, wide []string
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		if c.Priority == 0 {
			names = append(names, c.Name)
		} else {
			wide = append(wide, c.Name)
		}
	}
	if want := []string{"Type", "Capacity", "Zone", "Node", "Ready", "Age"}; !slices.Equal(names, want) {
		t.Errorf("columns %v, want %v", names, want)
	}
	if want := []string{"ImageID", "ID", "NodePool", "NodeClass", "Phase", "Drifted"}; !slices.Equal(wide, want) {
		t.Errorf("wide columns %v, want %v", wide, want)
	}
	if got := crd.Spec.Names.ShortNames; !slices.Equal(got, []string{"nc"}) {
		t.Errorf("short names %v, want [nc]", got)
	}
}

// schemaAt walks a dotted property path (".spec.disruption").
func schemaAt(props *apiextensionsv1.JSONSchemaProps, path string) *apiextensionsv1.JSONSchemaProps {
	for _, name := range strings.Split(strings.TrimPrefix(path, "."), ".") {
		child, ok := props.Properties[name]
		if !ok {
			return nil
		}
		props = &child
	}
	return props
}

// The CEL lists of well-known millwright.dev label keys are hand-written in
// the markers; this keeps them equal to WellKnownMillwrightLabels.
func TestCRDWellKnownLabelListsMatchGo(t *testing.T) {
	crd := loadCRD(t, crds.NodePoolFile)
	rules := map[string][]string{}
	celRules(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "", rules)
	want := append([]string{LabelNodePool}, WellKnownMillwrightLabels...)
	for _, path := range []string{".spec.template.metadata.labels", ".spec.template.spec.requirements[].key"} {
		var domainRule string
		for _, r := range rules[path] {
			if strings.Contains(r, "millwright[.]dev/") {
				domainRule = r
			}
		}
		if domainRule == "" {
			t.Fatalf("%s: no domain rule", path)
		}
		list := domainRule[strings.Index(domainRule, "["+"'")+1 : strings.LastIndex(domainRule, "]")]
		var got []string
		for _, item := range strings.Split(list, ",") {
			got = append(got, strings.Trim(strings.TrimSpace(item), "'"))
		}
		slices.Sort(got)
		wantSorted := slices.Sorted(slices.Values(want))
		if !slices.Equal(got, wantSorted) {
			t.Errorf("%s: CEL allow-list\n  %q\nwant\n  %q", path, got, wantSorted)
		}
	}
}

// minimumKubernetesVersion is the oldest API server whose CEL environment
// has every library the rules use (format.* arrived in 1.31, quantity in
// 1.28).
var minimumKubernetesVersion = version.MajorMinor(1, 31)

// Each CEL rule compiles, within the per-rule cost limit, in the CEL
// environment of the oldest supported Kubernetes, not only the one this
// module's apiextensions-apiserver version ships.
func TestCRDRulesCompileOnMinimumKubernetes(t *testing.T) {
	envSet := environment.MustBaseEnvSet(minimumKubernetesVersion)
	for _, file := range []string{crds.NodePoolFile, crds.EC2NodeClassFile} {
		t.Run(file, func(t *testing.T) {
			sim := newAPIServerSim(t, file)
			compiled := 0
			var walk func(s *structuralschema.Structural, path string, root bool)
			walk = func(s *structuralschema.Structural, path string, root bool) {
				if s == nil {
					return
				}
				if len(s.XValidations) > 0 {
					results, err := cel.Compile(s, model.SchemaDeclType(s, root), celconfig.PerCallLimit, envSet, cel.NewExpressionsEnvLoader())
					if err != nil {
						t.Fatalf("%s: %v", path, err)
					}
					for i, r := range results {
						compiled++
						if r.Error != nil {
							t.Errorf("%s rule %d (%s) does not compile on Kubernetes %s: %v", path, i, s.XValidations[i].Rule, minimumKubernetesVersion, r.Error)
						}
					}
				}
				for name, child := range s.Properties {
					walk(&child, path+"."+name, false)
				}
				walk(s.Items, path+"[]", false)
				if s.AdditionalProperties != nil {
					walk(s.AdditionalProperties.Structural, path+"{}", false)
				}
			}
			walk(sim.structural, "", true)
			if compiled == 0 {
				t.Fatal("found no CEL rules")
			}
			t.Logf("%d rules compile on Kubernetes %s", compiled, minimumKubernetesVersion)
		})
	}
}

package v1

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"

	"github.com/millwright/millwright/deploy/crds"
)

// fieldStatus is what Millwright does with a field of Karpenter's v1 API.
type fieldStatus string

const (
	// honoured: the field does what Karpenter's does (where says how).
	honoured fieldStatus = "honoured"
	// refused: an object setting it (or the value given) is refused by
	// the CRD and by Validate, naming the field.
	refused fieldStatus = "refused"
	// refusedUnknown: Millwright's schema has no such field: the API
	// server's strict field validation (kubectl's default) refuses it as
	// an unknown field naming it, and `starter migrate` lists it.
	refusedUnknown fieldStatus = "refused (unknown field)"
)

// karpenterField is one field of Karpenter v1's NodePool (karpenter.sh/v1,
// kubernetes-sigs/karpenter pkg/apis/v1/nodepool.go) or EC2NodeClass
// (karpenter.k8s.aws/v1, aws/karpenter-provider-aws pkg/apis/v1), as read
// from their sources; list items are [*]. A row covers the fields under it.
type karpenterField struct {
	kind, path string
	status     fieldStatus
	// where names the code that honours the field, or the reason.
	where string
	// value, for refused rows, is what the field is set to ("" for a
	// whole-field refusal: any value).
	value any
}

func karpenterFields() []karpenterField {
	const np, nc = "NodePool", "EC2NodeClass"
	h := func(kind, path, where string) karpenterField {
		return karpenterField{kind: kind, path: path, status: honoured, where: where}
	}
	r := func(kind, path string, value any) karpenterField {
		return karpenterField{kind: kind, path: path, status: refused, value: value}
	}
	return []karpenterField{
		h(np, "spec.template.metadata.labels", "Node labels (activities/planning specLabels, kube RegisterNode); restricted domains refused"),
		h(np, "spec.template.metadata.annotations", "Node annotations (launch spec Annotations, kube RegisterNode)"),
		h(np, "spec.template.spec.taints", "packer tolerations; Node taints at registration"),
		h(np, "spec.template.spec.startupTaints", "Node taints at registration, no toleration needed (packer)"),
		h(np, "spec.template.spec.requirements[*].key", "packer requirements, Karpenter's keys as aliases"),
		h(np, "spec.template.spec.requirements[*].operator", "packer requirements: In, NotIn, Exists, DoesNotExist, Gt, Lt"),
		h(np, "spec.template.spec.requirements[*].values", "packer requirements"),
		h(np, "spec.template.spec.requirements[*].minValues", "packer minvalues.go, CreateFleet overrides"),
		h(np, "spec.template.spec.nodeClassRef.group", "millwright.dev (starter migrate rewrites karpenter.k8s.aws)"),
		h(np, "spec.template.spec.nodeClassRef.kind", "EC2NodeClass"),
		h(np, "spec.template.spec.nodeClassRef.name", "the class the launch resolves"),
		h(np, "spec.template.spec.terminationGracePeriod", "node workflow drain (workflows/node_drain.go): pods deleted past it"),
		h(np, "spec.template.spec.expireAfter", "node workflow expiry (workflows/node_ready.go)"),
		h(np, "spec.disruption.consolidateAfter", "node workflow empty TTL and model/disruption"),
		h(np, "spec.disruption.consolidationPolicy", "model/disruption methods: WhenEmpty, WhenEmptyOrUnderutilized, Balanced (every move scored with k = 2)"),
		h(np, "spec.disruption.budgets[*].nodes", "budgets (activities/kube/disruption.go, model/disruption)"),
		h(np, "spec.disruption.budgets[*].schedule", "budget windows (UTC cron)"),
		h(np, "spec.disruption.budgets[*].duration", "budget windows"),
		h(np, "spec.disruption.budgets[*].reasons", "budgets per reason: Empty, Underutilized, Drifted"),
		h(np, "spec.limits", "packer prepare.go: no launch crosses a limit"),
		h(np, "spec.weight", "packer: pools tried by weight"),
		r(np, "spec.replicas", int64(3)),

		h(nc, "spec.subnetSelectorTerms[*].tags", "activities/cloud nodeclass.go DescribeSubnets"),
		h(nc, "spec.subnetSelectorTerms[*].id", "DescribeSubnets"),
		h(nc, "spec.securityGroupSelectorTerms[*].tags", "DescribeSecurityGroups"),
		h(nc, "spec.securityGroupSelectorTerms[*].id", "DescribeSecurityGroups"),
		h(nc, "spec.securityGroupSelectorTerms[*].name", "DescribeSecurityGroups group-name"),
		h(nc, "spec.amiSelectorTerms[*].alias", "aliasImages: al2, al2023, bottlerocket, windows2019/2022/2025, latest or pinned"),
		h(nc, "spec.amiSelectorTerms[*].tags", "DescribeImages"),
		h(nc, "spec.amiSelectorTerms[*].id", "DescribeImages"),
		h(nc, "spec.amiSelectorTerms[*].name", "DescribeImages"),
		h(nc, "spec.amiSelectorTerms[*].owner", "DescribeImages owners"),
		h(nc, "spec.amiSelectorTerms[*].ssmParameter", "SSM GetParameter"),
		h(nc, "spec.amiFamily", "activities/userdata: the family's user-data format"),
		h(nc, "spec.userData", "merged per family (activities/userdata)"),
		h(nc, "spec.role", "managed instance profile (activities/cloud instance profiles)"),
		h(nc, "spec.instanceProfile", "launch template IamInstanceProfile"),
		h(nc, "spec.tags", "instances, volumes and launch templates"),
		h(nc, "spec.kubelet.clusterDNS", "user data (nodeadm, bootstrap.sh, TOML, PowerShell)"),
		h(nc, "spec.kubelet.maxPods", "packer allocatable (model/catalog kubelet.go) and user data"),
		h(nc, "spec.kubelet.podsPerCore", "packer allocatable and user data"),
		h(nc, "spec.kubelet.systemReserved", "packer allocatable and user data"),
		h(nc, "spec.kubelet.kubeReserved", "packer allocatable and user data"),
		h(nc, "spec.kubelet.evictionHard", "packer allocatable and user data"),
		h(nc, "spec.kubelet.evictionSoft", "packer allocatable (held back) and user data"),
		h(nc, "spec.kubelet.evictionSoftGracePeriod", "user data"),
		h(nc, "spec.kubelet.evictionMaxPodGracePeriod", "user data"),
		h(nc, "spec.kubelet.imageGCHighThresholdPercent", "user data"),
		h(nc, "spec.kubelet.imageGCLowThresholdPercent", "user data"),
		h(nc, "spec.kubelet.cpuCFSQuota", "user data"),
		{kind: nc, path: "spec.kubelet.registerWithTaints", status: refusedUnknown, where: "Karpenter's open kubelet map: keys beyond the 12 above are unknown fields", value: true},
		h(nc, "spec.blockDeviceMappings[*].deviceName", "launch template BlockDeviceMappings"),
		h(nc, "spec.blockDeviceMappings[*].ebs.deleteOnTermination", "launch template"),
		h(nc, "spec.blockDeviceMappings[*].ebs.encrypted", "launch template"),
		h(nc, "spec.blockDeviceMappings[*].ebs.iops", "launch template"),
		h(nc, "spec.blockDeviceMappings[*].ebs.kmsKeyID", "launch template"),
		h(nc, "spec.blockDeviceMappings[*].ebs.snapshotID", "launch template"),
		h(nc, "spec.blockDeviceMappings[*].ebs.throughput", "launch template"),
		h(nc, "spec.blockDeviceMappings[*].ebs.volumeSize", "launch template"),
		h(nc, "spec.blockDeviceMappings[*].ebs.volumeType", "launch template"),
		r(nc, "spec.blockDeviceMappings[*].ebs.volumeInitializationRate", int64(200)),
		r(nc, "spec.blockDeviceMappings[*].rootVolume", true),
		h(nc, "spec.instanceStorePolicy", "RAID0 in the user data (nodeadm, --local-disks raid0, Bottlerocket)"),
		h(nc, "spec.associatePublicIPAddress", "launch template network interface"),
		h(nc, "spec.detailedMonitoring", "launch template Monitoring"),
		h(nc, "spec.metadataOptions.httpEndpoint", "launch template MetadataOptions"),
		h(nc, "spec.metadataOptions.httpPutResponseHopLimit", "launch template MetadataOptions"),
		h(nc, "spec.metadataOptions.httpTokens", "launch template MetadataOptions"),
		r(nc, "spec.capacityReservationSelectorTerms", []any{map[string]any{"id": "cr-0abc"}}),
		r(nc, "spec.placementGroupSelector", map[string]any{"name": "pg"}),
		r(nc, "spec.ipPrefixCount", int64(1)),
		r(nc, "spec.networkInterfaces", []any{map[string]any{"networkCardIndex": int64(0), "deviceIndex": int64(0), "interfaceType": "interface"}}),
		r(nc, "spec.connectionTracking", map[string]any{"tcpEstablishedTimeout": int64(60)}),
		r(nc, "spec.context", "arn:aws:ec2:context"),
		r(nc, "spec.cpuOptions", map[string]any{"nestedVirtualization": "enabled"}),
	}
}

// millwrightOnlyFields are Millwright's own (no Karpenter counterpart).
var millwrightOnlyFields = map[string][]string{
	"NodePool":     {"spec.minNodes"},
	"EC2NodeClass": {"spec.metadataOptions.httpProtocolIPv6"},
}

// TestKarpenterFieldsHonouredOrRefused: every field of Karpenter v1's
// NodePool and EC2NodeClass is honoured or refused naming the field, and
// every field of Millwright's schemas is in the table (or Millwright's
// own): nothing is accepted and silently ignored.
func TestKarpenterFieldsHonouredOrRefused(t *testing.T) {
	sims := map[string]*apiServerSim{"NodePool": newAPIServerSim(t, crds.NodePoolFile), "EC2NodeClass": newAPIServerSim(t, crds.EC2NodeClassFile)}
	rows := karpenterFields()
	for _, kind := range []string{"NodePool", "EC2NodeClass"} {
		leaves := schemaLeaves(specSchema(t, sims[kind].crd), "spec")
		for _, leaf := range leaves {
			if !slices.ContainsFunc(rows, func(f karpenterField) bool { return f.kind == kind && covers(f.path, leaf) }) &&
				!slices.ContainsFunc(millwrightOnlyFields[kind], func(p string) bool { return covers(p, leaf) }) {
				t.Errorf("%s field %s is in Millwright's schema but not in the table", kind, leaf)
			}
		}
	}
	for _, f := range rows {
		t.Run(f.kind+"/"+f.path+"/"+string(f.status), func(t *testing.T) {
			sim := sims[f.kind]
			declared := slices.ContainsFunc(schemaLeaves(specSchema(t, sim.crd), "spec"), func(leaf string) bool { return covers(f.path, leaf) })
			switch f.status {
			case honoured:
				if !declared || f.where == "" {
					t.Errorf("honoured but declared %v, where %q", declared, f.where)
				}
			case refused:
				object := withField(t, f.kind, f.path, f.value)
				path := strings.ReplaceAll(f.path, "[*]", "[0]")
				if errs := sim.create(t, object); !anyPathAgrees(errs, path) {
					t.Errorf("the CRD does not refuse %s = %v naming it:\n%s", path, f.value, describe(errs))
				}
				if errs := goValidation(t, f.kind, object); !hasFieldPath(errs, path) {
					t.Errorf("Validate does not refuse %s = %v naming it:\n%s", path, f.value, describe(errs))
				}
			case refusedUnknown:
				if declared {
					t.Fatalf("%s is declared in the schema", f.path)
				}
				object := withField(t, f.kind, f.path, f.value)
				if _, errs := sim.decode(object); !anyPathAgrees(errs, f.path) {
					t.Errorf("the API server's field validation does not name %s:\n%s", f.path, describe(errs))
				}
				data, _ := json.Marshal(withField(t, f.kind, f.path, f.value)) // decode pruned object
				strict, err := sigsjson.UnmarshalStrict(data, newObject(f.kind))
				if err != nil || len(strict) == 0 || !strings.Contains(strict[0].Error(), f.path) {
					t.Errorf("strict decoding does not name %s: %v %v", f.path, err, strict)
				}
			}
		})
	}
}

// TestUnsupportedFieldsListedOnce: every whole-field refusal of the table is
// in Unsupported…Fields (what `starter migrate` reports) and back.
func TestUnsupportedFieldsListedOnce(t *testing.T) {
	listed := map[string][]UnsupportedField{"NodePool": UnsupportedNodePoolFields, "EC2NodeClass": UnsupportedEC2NodeClassFields}
	for kind, fields := range listed {
		for _, u := range fields {
			if !slices.ContainsFunc(karpenterFields(), func(f karpenterField) bool {
				return f.kind == kind && f.path == u.Path && f.status == refused
			}) {
				t.Errorf("%s %s is listed unsupported but not refused in the table", kind, u.Path)
			}
		}
	}
	for _, f := range karpenterFields() {
		if f.status != refused {
			continue
		}
		if !slices.ContainsFunc(listed[f.kind], func(u UnsupportedField) bool { return u.Path == f.path }) {
			t.Errorf("%s %s is refused but not in the Unsupported%sFields list", f.kind, f.path, f.kind)
		}
	}
}

func specSchema(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	spec, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if !ok {
		t.Fatalf("%s: no spec", crd.Name)
	}
	return &spec
}

// schemaLeaves lists the paths of the schema's leaf fields (list items as
// [*]; maps and preserved objects are leaves).
func schemaLeaves(props *apiextensionsv1.JSONSchemaProps, path string) []string {
	switch {
	case len(props.Properties) > 0:
		var out []string
		for name, child := range props.Properties {
			out = append(out, schemaLeaves(&child, path+"."+name)...)
		}
		slices.Sort(out)
		return out
	case props.Items != nil && props.Items.Schema != nil && len(props.Items.Schema.Properties) > 0:
		return schemaLeaves(props.Items.Schema, path+"[*]")
	default:
		return []string{path}
	}
}

// covers reports whether row is leaf or one of its parents.
func covers(row, leaf string) bool {
	return row == leaf || strings.HasPrefix(leaf, row+".") || strings.HasPrefix(leaf, row+"[")
}

func newObject(kind string) any {
	if kind == "NodePool" {
		return &NodePool{}
	}
	return &EC2NodeClass{}
}

// withField is a valid object of kind (the fixtures, one block device)
// with path set to value, as a client sends it.
func withField(t *testing.T, kind, path string, value any) map[string]any {
	t.Helper()
	var object map[string]any
	if kind == "NodePool" {
		object = toUnstructured(t, aNodePool().build())
	} else {
		object = toUnstructured(t, anEC2NodeClass().withBlockDevice(rootVolume("20Gi")).build())
	}
	node := object
	parts := strings.Split(strings.ReplaceAll(path, "[*]", ".[*]"), ".")
	for i, part := range parts {
		last := i == len(parts)-1
		if last {
			node[part] = value
			break
		}
		if parts[i+1] == "[*]" {
			list, _ := node[part].([]any)
			if len(list) == 0 {
				t.Fatalf("%s: the fixture has no %s items", path, part)
			}
			node = list[0].(map[string]any)
			parts[i+1] = "" // consumed
			continue
		}
		if part == "" {
			continue
		}
		child, ok := node[part].(map[string]any)
		if !ok {
			child = map[string]any{}
			node[part] = child
		}
		node = child
	}
	return object
}

// goValidation decodes object into its Go type and validates it.
func goValidation(t *testing.T, kind string, object map[string]any) field.ErrorList {
	t.Helper()
	data, err := json.Marshal(object)
	if err != nil {
		t.Fatal(err)
	}
	target := newObject(kind)
	if err := json.Unmarshal(data, target); err != nil {
		return field.ErrorList{field.Invalid(nil, nil, err.Error())}
	}
	switch o := target.(type) {
	case *NodePool:
		return o.ValidationErrors()
	case *EC2NodeClass:
		return o.ValidationErrors()
	}
	return nil
}

func hasFieldPath(errs field.ErrorList, path string) bool {
	return slices.ContainsFunc(errs, func(e *field.Error) bool { return e.Field == path })
}

// Command crdpatch adds to the controller-gen CRD manifests the schema
// bounds that markers cannot express: lengths and patterns of map values
// (label values, kubelet quantities) and of fields of core types we embed
// (corev1.Taint). Karpenter does the same with yq scripts.
//
// The bounds matter twice: they are validation the Go side mirrors, and the
// API server refuses a CRD whose CEL rules could cost too much on unbounded
// strings, so the CEL rules over these values only fit the budget once the
// values are bounded.
//
// It rewrites the files in place and is idempotent. Run it through
// `go generate ./model/apis/v1`, after controller-gen.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// labelValuePattern is the Kubernetes label value syntax
// (k8s.io/apimachinery/pkg/util/validation.IsValidLabelValue).
const labelValuePattern = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`

// A patch sets keywords on the schema node at path: dot-separated property
// names, "[]" for array items, "{}" for map values.
type patch struct {
	path string
	set  map[string]any
}

var patches = map[string][]patch{
	"millwright.dev_nodepools.yaml": {
		{"spec.template.metadata.labels.{}", map[string]any{"maxLength": 63, "pattern": labelValuePattern}},
		{"spec.template.metadata.annotations", map[string]any{"maxProperties": 100}},
		{"spec.template.spec.taints.[].key", map[string]any{"maxLength": 317}},
		{"spec.template.spec.taints.[].value", map[string]any{"maxLength": 63}},
		{"spec.template.spec.taints.[].effect", map[string]any{"maxLength": 16}},
		{"spec.template.spec.startupTaints.[].key", map[string]any{"maxLength": 317}},
		{"spec.template.spec.startupTaints.[].value", map[string]any{"maxLength": 63}},
		{"spec.template.spec.startupTaints.[].effect", map[string]any{"maxLength": 16}},
		{"spec.limits.{}", map[string]any{"maxLength": 64}},
	},
	"millwright.dev_ec2nodeclasses.yaml": {
		{"spec.kubelet.systemReserved.{}", map[string]any{"maxLength": 64}},
		{"spec.kubelet.kubeReserved.{}", map[string]any{"maxLength": 64}},
		{"spec.kubelet.evictionHard.{}", map[string]any{"maxLength": 64}},
		{"spec.kubelet.evictionSoft.{}", map[string]any{"maxLength": 64}},
		{"spec.kubelet.systemReserved", map[string]any{"maxProperties": 4}},
		{"spec.kubelet.kubeReserved", map[string]any{"maxProperties": 4}},
		{"spec.kubelet.evictionHard", map[string]any{"maxProperties": 6}},
		{"spec.kubelet.evictionSoft", map[string]any{"maxProperties": 6}},
		{"spec.kubelet.evictionSoftGracePeriod", map[string]any{"maxProperties": 6}},
	},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch <dir with CRD manifests>")
		os.Exit(2)
	}
	for file, ps := range patches {
		if err := patchFile(filepath.Join(os.Args[1], file), ps); err != nil {
			fmt.Fprintln(os.Stderr, "crdpatch:", err)
			os.Exit(1)
		}
	}
}

func patchFile(path string, ps []patch) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	if len(versions) == 0 {
		return fmt.Errorf("%s: no spec.versions", path)
	}
	for _, v := range versions {
		root, _ := dig(v, "schema", "openAPIV3Schema").(map[string]any)
		for _, p := range ps {
			node, err := schemaNode(root, p.path)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", path, p.path, err)
			}
			for k, val := range p.set {
				node[k] = val
			}
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	// controller-gen starts each manifest with a document separator; keep
	// that so regenerating without patching shows only the real diff.
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

func dig(node any, keys ...string) any {
	for _, k := range keys {
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[k]
	}
	return node
}

func schemaNode(root map[string]any, path string) (map[string]any, error) {
	node := root
	for _, step := range strings.Split(path, ".") {
		var next any
		switch step {
		case "[]":
			next = node["items"]
		case "{}":
			next = node["additionalProperties"]
		default:
			next = dig(node, "properties", step)
		}
		m, ok := next.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("no schema at %q", step)
		}
		node = m
	}
	return node, nil
}

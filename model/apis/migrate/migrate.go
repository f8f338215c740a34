// Package migrate owns rewriting Karpenter v1 manifests (karpenter.sh/v1
// NodePool, karpenter.k8s.aws/v1 EC2NodeClass, in multi-document YAML) into
// Millwright's millwright.dev/v1, and saying what it changed and what
// Millwright does not support.
//
// What it rewrites: the API groups (apiVersion, nodeClassRef.group), the
// Karpenter discovery tag in selector terms (karpenter.sh/discovery →
// millwright.dev/discovery) and the KarpenterNodeRole- role prefix.
// Requirement keys Millwright honours under Karpenter's name
// (karpenter.sh/capacity-type, karpenter.k8s.aws/instance-category, …) are
// kept as written. Fields Millwright's API does not have are reported as
// unsupported and kept, so the API server refuses them naming the field,
// unless the caller asks to drop them. Other documents pass through
// unchanged. Comments and key order are preserved.
//
// It reads and writes YAML; it does not talk to a cluster.
package migrate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/scheduling"
)

// Karpenter's API groups and names Millwright renames.
const (
	KarpenterNodePoolAPIVersion  = "karpenter.sh/v1"
	KarpenterNodeClassAPIVersion = "karpenter.k8s.aws/v1"
	karpenterNodeClassGroup      = "karpenter.k8s.aws"
	karpenterDiscoveryTag        = "karpenter.sh/discovery"
	millwrightDiscoveryTag       = "millwright.dev/discovery"
	karpenterRolePrefix          = "KarpenterNodeRole-"
	millwrightRolePrefix         = "MillwrightNodeRole-"
)

// Change is one thing Migrate did or could not do.
type Change struct {
	// Document is the 1-based index of the YAML document.
	Document int
	// Kind and Name identify the object.
	Kind, Name string
	// Path is the field, e.g. spec.template.spec.nodeClassRef.group.
	Path string
	// Message says what happened.
	Message string
	// Unsupported is true when Millwright does not implement the field or
	// value.
	Unsupported bool
}

func (c Change) String() string {
	what := "changed"
	if c.Unsupported {
		what = "unsupported"
	}
	return fmt.Sprintf("%s %s/%s (document %d) %s: %s", what, c.Kind, c.Name, c.Document, c.Path, c.Message)
}

// Options tune Migrate.
type Options struct {
	// DropUnsupported removes unsupported fields from the output instead
	// of keeping them for the API server to refuse.
	DropUnsupported bool
}

// Result is a migrated manifest.
type Result struct {
	// Manifest is the rewritten multi-document YAML.
	Manifest []byte
	Changes  []Change
}

// Unsupported lists the changes that are about unsupported fields or
// values.
func (r Result) Unsupported() []Change {
	var out []Change
	for _, c := range r.Changes {
		if c.Unsupported {
			out = append(out, c)
		}
	}
	return out
}

// Migrate rewrites every Karpenter NodePool and EC2NodeClass in manifest.
// A document that is not YAML is an error naming it.
func Migrate(manifest []byte, opts Options) (Result, error) {
	decoder := yaml.NewDecoder(bytes.NewReader(manifest))
	var out bytes.Buffer
	encoder := yaml.NewEncoder(&out)
	encoder.SetIndent(2)
	var result Result
	for i := 1; ; i++ {
		var doc yaml.Node
		err := decoder.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Result{}, fmt.Errorf("document %d: %w", i, err)
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue
		}
		m := &document{index: i, root: doc.Content[0], opts: opts}
		if err := m.migrate(); err != nil {
			return Result{}, err
		}
		result.Changes = append(result.Changes, m.changes...)
		if err := encoder.Encode(&doc); err != nil {
			return Result{}, fmt.Errorf("document %d: encoding: %w", i, err)
		}
	}
	if err := encoder.Close(); err != nil {
		return Result{}, err
	}
	result.Manifest = out.Bytes()
	return result, nil
}

type document struct {
	index      int
	root       *yaml.Node
	opts       Options
	kind, name string
	changes    []Change
}

func (d *document) changed(path, format string, args ...any) {
	d.changes = append(d.changes, Change{Document: d.index, Kind: d.kind, Name: d.name, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (d *document) unsupported(path, format string, args ...any) {
	d.changes = append(d.changes, Change{Document: d.index, Kind: d.kind, Name: d.name, Path: path, Message: fmt.Sprintf(format, args...), Unsupported: true})
}

func (d *document) migrate() error {
	apiVersion := scalar(d.root, "apiVersion")
	d.kind = scalar(d.root, "kind")
	if meta := child(d.root, "metadata"); meta != nil {
		d.name = scalar(meta, "name")
	}
	switch {
	case apiVersion == KarpenterNodePoolAPIVersion && d.kind == "NodePool":
		d.setAPIVersion()
		d.nodePool()
	case apiVersion == KarpenterNodeClassAPIVersion && d.kind == "EC2NodeClass":
		d.setAPIVersion()
		d.nodeClass()
	case strings.HasPrefix(apiVersion, "karpenter.sh/") || strings.HasPrefix(apiVersion, "karpenter.k8s.aws/"):
		d.unsupported("apiVersion", "%s %s is not migrated: Millwright reads Karpenter v1 NodePools and EC2NodeClasses (convert v1beta1 with Karpenter's own tooling first)", apiVersion, d.kind)
		return nil
	default:
		return nil
	}
	return d.unknownFields()
}

func (d *document) setAPIVersion() {
	from := scalar(d.root, "apiVersion")
	setScalar(d.root, "apiVersion", apisv1.SchemeGroupVersion.String())
	d.changed("apiVersion", "%s → %s", from, apisv1.SchemeGroupVersion.String())
}

func (d *document) nodePool() {
	spec := child(d.root, "spec")
	if spec == nil {
		return
	}
	templateSpec := child(child(spec, "template"), "spec")
	if ref := child(templateSpec, "nodeClassRef"); ref != nil && scalar(ref, "group") == karpenterNodeClassGroup {
		setScalar(ref, "group", apisv1.Group)
		d.changed("spec.template.spec.nodeClassRef.group", "%s → %s", karpenterNodeClassGroup, apisv1.Group)
	}
	{
		for i, req := range items(child(templateSpec, "requirements")) {
			path := fmt.Sprintf("spec.template.spec.requirements[%d]", i)
			key := scalar(req, "key")
			if isKarpenterKey(key) && scheduling.CanonicalLabelKey(key) == key {
				d.unsupported(path+".key", "Millwright does not know the label %s; no instance type carries it, so the requirement matches nothing", key)
			}
			if scheduling.CanonicalLabelKey(key) == scheduling.LabelCapacityType {
				for _, v := range sequence(child(req, "values")) {
					if v != scheduling.CapacityTypeSpot && v != scheduling.CapacityTypeOnDemand {
						d.unsupported(path+".values", "capacity type %q is not supported (Millwright launches spot and on-demand)", v)
					}
				}
			}
		}
	}
}

func isKarpenterKey(key string) bool {
	return strings.HasPrefix(key, "karpenter.sh/") || strings.HasPrefix(key, "karpenter.k8s.aws/")
}

func (d *document) nodeClass() {
	spec := child(d.root, "spec")
	if spec == nil {
		return
	}
	for _, field := range []string{"subnetSelectorTerms", "securityGroupSelectorTerms", "amiSelectorTerms"} {
		for i, term := range items(child(spec, field)) {
			tags := child(term, "tags")
			if tags == nil {
				continue
			}
			for j := 0; j+1 < len(tags.Content); j += 2 {
				if tags.Content[j].Value == karpenterDiscoveryTag {
					tags.Content[j].Value = millwrightDiscoveryTag
					d.changed(fmt.Sprintf("spec.%s[%d].tags", field, i), "%s → %s", karpenterDiscoveryTag, millwrightDiscoveryTag)
				}
			}
		}
	}
	if role := child(spec, "role"); role != nil && strings.HasPrefix(role.Value, karpenterRolePrefix) {
		from := role.Value
		role.Value = millwrightRolePrefix + strings.TrimPrefix(role.Value, karpenterRolePrefix)
		d.changed("spec.role", "%s → %s (Millwright creates and manages the instance profile for it)", from, role.Value)
	}
}

// unknownFieldRE reads the field path out of a strict decoding error.
var unknownFieldRE = regexp.MustCompile(`unknown field "([^"]+)"`)

// unknownFields decodes the migrated object strictly into Millwright's
// API type; every field the type lacks is unsupported.
func (d *document) unknownFields() error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(d.root); err != nil {
		return fmt.Errorf("document %d: %w", d.index, err)
	}
	data, err := sigsyaml.YAMLToJSON(buf.Bytes())
	if err != nil {
		return fmt.Errorf("document %d: %w", d.index, err)
	}
	var target any = &apisv1.NodePool{}
	if d.kind == "EC2NodeClass" {
		target = &apisv1.EC2NodeClass{}
	}
	strict, err := sigsjson.UnmarshalStrict(data, target)
	if err != nil {
		return fmt.Errorf("document %d (%s %s): %w", d.index, d.kind, d.name, err)
	}
	var paths []string
	for _, e := range strict {
		match := unknownFieldRE.FindStringSubmatch(e.Error())
		if match == nil {
			d.unsupported("", "%v", e)
			continue
		}
		paths = append(paths, match[1])
	}
	// Karpenter's fields Millwright declares only to refuse them.
	var refused field.ErrorList
	switch object := target.(type) {
	case *apisv1.NodePool:
		refused = object.UnsupportedFieldsSet()
	case *apisv1.EC2NodeClass:
		refused = object.UnsupportedFieldsSet()
	}
	reasons := map[string]string{}
	for _, e := range refused {
		paths = append(paths, e.Field)
		reasons[e.Field] = e.Detail
	}
	for _, path := range paths {
		message := reasons[path]
		if message == "" {
			message = unsupportedFields[fieldPattern(path)]
		}
		if message == "" {
			message = "Millwright's API has no such field"
		}
		if d.opts.DropUnsupported {
			removePath(d.root, path)
			message += " (removed)"
		} else {
			message += " (kept: the API server refuses it)"
		}
		d.unsupported(path, "%s", message)
	}
	return nil
}

// unsupportedFields say why Karpenter fields are missing, by path with
// list indexes written [*].
var unsupportedFields = map[string]string{
	"spec.metadataOptions.nestedVirtualization": "nested virtualization is not supported",
}

var indexRE = regexp.MustCompile(`\[[0-9]+\]`)

func fieldPattern(path string) string { return indexRE.ReplaceAllString(path, "[*]") }

// removePath deletes the field at path (a.b[2].c) from a mapping.
func removePath(root *yaml.Node, path string) {
	parts := strings.Split(path, ".")
	node := root
	for i, part := range parts {
		name, index := part, -1
		if open := strings.IndexByte(part, '['); open >= 0 {
			name = part[:open]
			index, _ = strconv.Atoi(strings.TrimSuffix(part[open+1:], "]"))
		}
		if i == len(parts)-1 && index < 0 {
			deleteKey(node, name)
			return
		}
		node = child(node, name)
		if node == nil {
			return
		}
		if index >= 0 {
			if node.Kind != yaml.SequenceNode || index >= len(node.Content) {
				return
			}
			node = node.Content[index]
		}
	}
}

// yaml.v3 helpers over mapping nodes.

// items are a sequence's elements (none for anything else).
func items(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

func child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(m *yaml.Node, key string) string {
	if n := child(m, key); n != nil && n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return ""
}

func setScalar(m *yaml.Node, key, value string) {
	if n := child(m, key); n != nil {
		n.Value = value
	}
}

func sequence(n *yaml.Node) []string {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		out = append(out, item.Value)
	}
	return out
}

func deleteKey(m *yaml.Node, key string) {
	if m == nil || m.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

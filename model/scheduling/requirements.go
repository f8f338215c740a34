package scheduling

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ErrUnsatisfiable is wrapped by errors that say no node can meet a set of
// requirements (an empty intersection).
var ErrUnsatisfiable = errors.New("requirements cannot be satisfied")

// IsUnsatisfiable reports whether err says requirements cannot be satisfied.
func IsUnsatisfiable(err error) bool { return errors.Is(err, ErrUnsatisfiable) }

// Requirement is what one label key may be on a node: a set of values (a
// finite set, or the complement of one), optional integer bounds (Gt/Lt), and
// whether the node may lack the label altogether.
//
// The six NodeSelector operators map onto it as Karpenter's algebra does:
// In = {values}; NotIn = all but {values}, absent allowed; Exists = all values;
// DoesNotExist = no value, absent allowed; Gt/Lt = all values within a bound.
// Keeping "absent allowed" explicit makes Intersect exact, e.g.
// NotIn[a] ∩ DoesNotExist = DoesNotExist, In[a] ∩ NotIn[a] = unsatisfiable.
type Requirement struct {
	key        string
	complement bool     // values are the excluded ones
	values     []string // sorted, unique
	hasGT      bool
	gt         int64 // value must be > gt
	hasLT      bool
	lt         int64 // value must be < lt
	absentOK   bool
}

// NewRequirement builds a requirement from a NodeSelector operator. The key is
// canonicalised (Karpenter aliases accepted). Gt and Lt take one integer.
func NewRequirement(key string, op corev1.NodeSelectorOperator, values ...string) (Requirement, error) {
	r := Requirement{key: CanonicalLabelKey(key)}
	switch op {
	case corev1.NodeSelectorOpIn:
		r.values = sortedUnique(values)
	case corev1.NodeSelectorOpNotIn:
		r.complement, r.absentOK = true, true
		r.values = sortedUnique(values)
	case corev1.NodeSelectorOpExists:
		r.complement = true
	case corev1.NodeSelectorOpDoesNotExist:
		r.absentOK = true
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(values) != 1 {
			return Requirement{}, fmt.Errorf("requirement %q: operator %s needs exactly one integer value, got %d values", key, op, len(values))
		}
		n, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return Requirement{}, fmt.Errorf("requirement %q: operator %s needs an integer value, got %q", key, op, values[0])
		}
		r.complement = true
		if op == corev1.NodeSelectorOpGt {
			r.hasGT, r.gt = true, n
		} else {
			r.hasLT, r.lt = true, n
		}
	default:
		return Requirement{}, fmt.Errorf("requirement %q: operator %q is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt", key, op)
	}
	return r, nil
}

// MustRequirement is NewRequirement for literals known to be valid.
func MustRequirement(key string, op corev1.NodeSelectorOperator, values ...string) Requirement {
	r, err := NewRequirement(key, op, values...)
	if err != nil {
		panic(err)
	}
	return r
}

// Key returns the canonical label key.
func (r Requirement) Key() string { return r.key }

// AllowsAbsent reports whether a node without the label satisfies r.
func (r Requirement) AllowsAbsent() bool { return r.absentOK }

// Has reports whether a node whose label has this value satisfies r.
func (r Requirement) Has(value string) bool {
	i := sort.SearchStrings(r.values, value)
	listed := i < len(r.values) && r.values[i] == value
	if listed == r.complement {
		return false
	}
	if r.hasGT || r.hasLT {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || (r.hasGT && n <= r.gt) || (r.hasLT && n >= r.lt) {
			return false
		}
	}
	return true
}

// Matches reports whether a node label (value, present) satisfies r.
func (r Requirement) Matches(value string, present bool) bool {
	if !present {
		return r.absentOK
	}
	return r.Has(value)
}

// Intersect returns the requirement both r and o impose (same key assumed).
func (r Requirement) Intersect(o Requirement) Requirement {
	out := Requirement{key: r.key, absentOK: r.absentOK && o.absentOK}
	switch {
	case !r.complement && !o.complement:
		out.values = intersectSorted(r.values, o.values)
	case !r.complement && o.complement:
		out.values = subtractSorted(r.values, o.values)
	case r.complement && !o.complement:
		out.values = subtractSorted(o.values, r.values)
	default:
		out.complement = true
		out.values = unionSorted(r.values, o.values)
	}
	out.hasGT, out.gt = r.hasGT, r.gt
	if o.hasGT && (!out.hasGT || o.gt > out.gt) {
		out.hasGT, out.gt = true, o.gt
	}
	out.hasLT, out.lt = r.hasLT, r.lt
	if o.hasLT && (!out.hasLT || o.lt < out.lt) {
		out.hasLT, out.lt = true, o.lt
	}
	if !out.complement && (out.hasGT || out.hasLT) {
		kept := out.values[:0:0]
		for _, v := range out.values {
			if out.Has(v) {
				kept = append(kept, v)
			}
		}
		out.values = kept
	}
	return out
}

// Satisfiable reports whether some node (with some value, or without the
// label) can meet r.
func (r Requirement) Satisfiable() bool {
	if r.absentOK {
		return true
	}
	if !r.complement {
		return len(r.values) > 0
	}
	if r.hasGT && r.hasLT {
		if r.lt-r.gt <= 1 {
			return false
		}
		// A bounded range may be fully excluded by the listed values.
		if span := r.lt - r.gt - 1; span <= int64(len(r.values)) {
			for n := r.gt + 1; n < r.lt; n++ {
				if r.Has(strconv.FormatInt(n, 10)) {
					return true
				}
			}
			return false
		}
	}
	return true
}

// Values returns the allowed values of a finite (In-like) requirement, or
// nil for a complement set.
func (r Requirement) Values() []string {
	if r.complement {
		return nil
	}
	return append([]string(nil), r.values...)
}

// IsFinite reports whether r allows only a listed set of values.
func (r Requirement) IsFinite() bool { return !r.complement }

// SingleValue returns the value when r allows exactly one value and not
// absence (an In with one value): the value a node must be labelled with.
func (r Requirement) SingleValue() (string, bool) {
	if !r.complement && !r.absentOK && len(r.values) == 1 {
		return r.values[0], true
	}
	return "", false
}

// String renders r in NodeSelector terms, e.g. `kubernetes.io/arch In [amd64 arm64]`.
func (r Requirement) String() string {
	var parts []string
	switch {
	case !r.complement && len(r.values) == 0 && r.absentOK:
		parts = append(parts, "DoesNotExist")
	case !r.complement:
		parts = append(parts, fmt.Sprintf("In [%s]", strings.Join(r.values, " ")))
	case r.absentOK:
		parts = append(parts, fmt.Sprintf("NotIn [%s]", strings.Join(r.values, " ")))
	default:
		if len(r.values) > 0 {
			parts = append(parts, fmt.Sprintf("NotIn [%s]", strings.Join(r.values, " ")))
		}
		if !r.hasGT && !r.hasLT {
			parts = append(parts, "Exists")
		}
	}
	if r.complement {
		if r.hasGT {
			parts = append(parts, fmt.Sprintf("Gt %d", r.gt))
		}
		if r.hasLT {
			parts = append(parts, fmt.Sprintf("Lt %d", r.lt))
		}
	}
	return r.key + " " + strings.Join(parts, ", ")
}

// Requirements is a conjunction of per-key requirements, kept sorted by key
// (so iteration and String are deterministic).
type Requirements struct {
	items []Requirement
}

// NewRequirements returns the conjunction of reqs (repeated keys intersect).
func NewRequirements(reqs ...Requirement) Requirements {
	var rs Requirements
	rs.Add(reqs...)
	return rs
}

// RequirementsFromNodeSelector converts NodeSelectorRequirements (a
// NodePool's requirements or one node-affinity term); the error names the
// index of the malformed entry.
func RequirementsFromNodeSelector(reqs []corev1.NodeSelectorRequirement) (Requirements, error) {
	var rs Requirements
	for i, nsr := range reqs {
		r, err := NewRequirement(nsr.Key, nsr.Operator, nsr.Values...)
		if err != nil {
			return Requirements{}, fmt.Errorf("requirements[%d]: %w", i, err)
		}
		rs.Add(r)
	}
	return rs, nil
}

// RequirementsFromLabels returns `key In [value]` for every label.
func RequirementsFromLabels(labels map[string]string) Requirements {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var rs Requirements
	for _, k := range keys {
		rs.Add(MustRequirement(k, corev1.NodeSelectorOpIn, labels[k]))
	}
	return rs
}

// Add intersects reqs into rs.
func (rs *Requirements) Add(reqs ...Requirement) {
	for _, r := range reqs {
		i := sort.Search(len(rs.items), func(i int) bool { return rs.items[i].key >= r.key })
		if i < len(rs.items) && rs.items[i].key == r.key {
			rs.items[i] = rs.items[i].Intersect(r)
			continue
		}
		rs.items = append(rs.items, Requirement{})
		copy(rs.items[i+1:], rs.items[i:])
		rs.items[i] = r
	}
}

// Get returns the requirement on key (canonicalised), if any.
func (rs Requirements) Get(key string) (Requirement, bool) {
	key = CanonicalLabelKey(key)
	i := sort.Search(len(rs.items), func(i int) bool { return rs.items[i].key >= key })
	if i < len(rs.items) && rs.items[i].key == key {
		return rs.items[i], true
	}
	return Requirement{}, false
}

// Has reports whether rs constrains key.
func (rs Requirements) Has(key string) bool {
	_, ok := rs.Get(key)
	return ok
}

// Len is the number of constrained keys.
func (rs Requirements) Len() int { return len(rs.items) }

// Items returns the per-key requirements, sorted by key.
func (rs Requirements) Items() []Requirement { return append([]Requirement(nil), rs.items...) }

// Keys returns the constrained keys, sorted.
func (rs Requirements) Keys() []string {
	keys := make([]string, len(rs.items))
	for i, r := range rs.items {
		keys[i] = r.key
	}
	return keys
}

// Intersect returns the conjunction of rs and o.
func (rs Requirements) Intersect(o Requirements) Requirements {
	out := Requirements{items: append([]Requirement(nil), rs.items...)}
	out.Add(o.items...)
	return out
}

// Satisfiable returns an error naming the first key no node can meet.
func (rs Requirements) Satisfiable() error {
	for _, r := range rs.items {
		if !r.Satisfiable() {
			return fmt.Errorf("%w: %s", ErrUnsatisfiable, r)
		}
	}
	return nil
}

// Intersects returns an error naming the first key both rs and o constrain
// with no common value (keys only one side constrains are ignored).
func (rs Requirements) Intersects(o Requirements) error {
	for _, r := range o.items {
		if mine, ok := rs.Get(r.key); ok {
			if !mine.Intersect(r).Satisfiable() {
				return fmt.Errorf("%w: %s conflicts with %s", ErrUnsatisfiable, r, mine)
			}
		}
	}
	return nil
}

// Compatible reports whether a node described by rs (say, a NodePool's
// template or an instance type's labels) can meet o (say, a pod's): every
// key of o must intersect rs's requirement on it, and a key rs does not
// define must be one o allows to be absent.
func (rs Requirements) Compatible(o Requirements) error {
	for _, r := range o.items {
		mine, ok := rs.Get(r.key)
		if !ok {
			if !r.absentOK {
				return fmt.Errorf("%w: %s, but label %q is not defined", ErrUnsatisfiable, r, r.key)
			}
			continue
		}
		if !mine.Intersect(r).Satisfiable() {
			return fmt.Errorf("%w: %s conflicts with %s", ErrUnsatisfiable, r, mine)
		}
	}
	return nil
}

// Matches reports whether a node with these (canonical) labels meets rs.
func (rs Requirements) Matches(labels map[string]string) bool {
	_, bad := rs.FirstMismatch(labels)
	return !bad
}

// FirstMismatch returns the first requirement the labels do not meet.
func (rs Requirements) FirstMismatch(labels map[string]string) (Requirement, bool) {
	for _, r := range rs.items {
		v, ok := labels[r.key]
		if !r.Matches(v, ok) {
			return r, true
		}
	}
	return Requirement{}, false
}

// Labels returns the labels rs pins to a single value (In with one value):
// what every node meeting rs must carry.
func (rs Requirements) Labels() map[string]string {
	out := map[string]string{}
	for _, r := range rs.items {
		if v, ok := r.SingleValue(); ok {
			out[r.key] = v
		}
	}
	return out
}

// NodeSelectorRequirements converts rs back to the Kubernetes form.
func (rs Requirements) NodeSelectorRequirements() []corev1.NodeSelectorRequirement {
	var out []corev1.NodeSelectorRequirement
	for _, r := range rs.items {
		switch {
		case !r.complement && len(r.values) == 0 && r.absentOK:
			out = append(out, corev1.NodeSelectorRequirement{Key: r.key, Operator: corev1.NodeSelectorOpDoesNotExist})
		case !r.complement:
			out = append(out, corev1.NodeSelectorRequirement{Key: r.key, Operator: corev1.NodeSelectorOpIn, Values: r.Values()})
		default:
			if len(r.values) > 0 {
				out = append(out, corev1.NodeSelectorRequirement{Key: r.key, Operator: corev1.NodeSelectorOpNotIn, Values: append([]string(nil), r.values...)})
			} else if !r.hasGT && !r.hasLT && !r.absentOK {
				out = append(out, corev1.NodeSelectorRequirement{Key: r.key, Operator: corev1.NodeSelectorOpExists})
			}
			if r.hasGT {
				out = append(out, corev1.NodeSelectorRequirement{Key: r.key, Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.FormatInt(r.gt, 10)}})
			}
			if r.hasLT {
				out = append(out, corev1.NodeSelectorRequirement{Key: r.key, Operator: corev1.NodeSelectorOpLt, Values: []string{strconv.FormatInt(r.lt, 10)}})
			}
		}
	}
	return out
}

// String renders rs as `key op values; ...`.
func (rs Requirements) String() string {
	parts := make([]string, len(rs.items))
	for i, r := range rs.items {
		parts[i] = r.String()
	}
	return strings.Join(parts, "; ")
}

func sortedUnique(values []string) []string {
	out := append([]string(nil), values...)
	sort.Strings(out)
	n := 0
	for i, v := range out {
		if i == 0 || v != out[n-1] {
			out[n] = v
			n++
		}
	}
	return out[:n]
}

func intersectSorted(a, b []string) []string {
	var out []string
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			out = append(out, a[i])
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return out
}

func subtractSorted(a, b []string) []string {
	var out []string
	j := 0
	for _, v := range a {
		for j < len(b) && b[j] < v {
			j++
		}
		if j < len(b) && b[j] == v {
			continue
		}
		out = append(out, v)
	}
	return out
}

func unionSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

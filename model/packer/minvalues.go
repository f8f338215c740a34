package packer

import (
	"fmt"
	"sort"
	"strings"

	"github.com/millwright/millwright/model/scheduling"
)

// minValues is one NodePool requirement's minValues: the launch options of
// every node of the pool must span at least min distinct values of key
// (Karpenter's semantics, so that a launch has enough instance types to
// fall back on). A type without the label counts no value.
type minValues struct {
	key string // canonical
	min int
}

// poolMinValues resolves NodePool.MinValues, keys canonical, sorted.
func poolMinValues(np *NodePool) ([]minValues, error) {
	var out []minValues
	for k, n := range np.MinValues {
		if n < 1 {
			return nil, fmt.Errorf("minValues[%s]: %d is not positive", k, n)
		}
		out = append(out, minValues{key: scheduling.CanonicalLabelKey(k), min: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

// valueOf is the value of key on pool type pt ("" and false when absent).
func valueOf(pt *poolType, key string) (string, bool) {
	v, ok := pt.labels[key]
	return v, ok
}

// coverage counts the distinct values of each minValues key among cands.
func (p *packer) coverage(mvs []minValues, cands []candidate) []int {
	out := make([]int, len(mvs))
	for i, mv := range mvs {
		seen := map[string]bool{}
		for _, c := range cands {
			if v, ok := valueOf(p.pts[c.pt], mv.key); ok {
				seen[v] = true
			}
		}
		out[i] = len(seen)
	}
	return out
}

// withMinValues picks at most limit launches from feasible (cheapest
// first) that span every minValues key: first, for each key in turn, the
// cheapest launch of each value not yet covered until the key has enough,
// then the cheapest of the rest. It returns the picks cheapest first, and
// the first unmet requirement ("" when all are met).
func (p *packer) withMinValues(mvs []minValues, feasible []candidate, limit int) ([]candidate, string) {
	picked := make([]bool, len(feasible))
	count := 0
	for _, mv := range mvs {
		seen := map[string]bool{}
		for i, c := range feasible {
			if picked[i] {
				if v, ok := valueOf(p.pts[c.pt], mv.key); ok {
					seen[v] = true
				}
			}
		}
		for i, c := range feasible {
			if len(seen) >= mv.min || count == limit {
				break
			}
			v, ok := valueOf(p.pts[c.pt], mv.key)
			if !ok || seen[v] || picked[i] {
				continue
			}
			seen[v], picked[i] = true, true
			count++
		}
	}
	for i := range feasible {
		if count == limit {
			break
		}
		if !picked[i] {
			picked[i] = true
			count++
		}
	}
	var out []candidate
	for i, c := range feasible {
		if picked[i] {
			out = append(out, c)
		}
	}
	for i, n := range p.coverage(mvs, out) {
		if n < mvs[i].min {
			return out, fmt.Sprintf("%s minValues %d: the instance types that fit the node's pods have %d distinct values", mvs[i].key, mvs[i].min, n)
		}
	}
	return out, ""
}

// minValuesReason joins the pools' unmet minValues for a message.
func minValuesReason(pool, unmet string) string {
	return "nodepool " + pool + " requirement " + strings.TrimSpace(unmet)
}

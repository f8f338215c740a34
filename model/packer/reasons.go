package packer

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/model/scheduling"
)

// diagnose names the constraint that keeps c's pending pods off every node,
// checking in the order a launch is built: taints, node requirements,
// offerings, resources, limits, topology.
func (p *packer) diagnose(c *podClass) string {
	if c.err != nil {
		var ve *volumeError
		if errors.As(c.err, &ve) {
			return ve.Error()
		}
		return "invalid pod: " + c.err.Error()
	}
	if c.blocked != "" {
		return c.blocked
	}
	if len(c.alts) == 0 {
		if len(c.volumes) > 0 {
			if plain, err := scheduling.PodRequirements(c.rep); err == nil && len(plain) > 0 {
				return "no instance type satisfies: the node requirements together with the volume topology of " + c.volumes[0].source + " have no satisfiable term"
			}
		}
		return "no instance type satisfies: required node affinity has no satisfiable term"
	}
	if len(p.pools) == 0 && p.nExisting == 0 {
		return "no nodepool"
	}
	var tolerated []int
	for pi := range p.pools {
		if c.tol[pi] {
			tolerated = append(tolerated, pi)
		}
	}
	if len(tolerated) == 0 {
		if len(p.pools) == 0 {
			return "no existing node can take the pod and there is no nodepool"
		}
		var parts []string
		for _, pl := range p.pools {
			if t, bad := scheduling.UntoleratedTaint(c.rep.Spec.Tolerations, pl.taints); bad {
				parts = append(parts, fmt.Sprintf("%s (nodepool %s)", scheduling.TaintString(t), pl.name))
			}
		}
		return "no nodepool's taints are tolerated: " + strings.Join(dedupe(parts), ", ")
	}
	if c.ports != nil {
		for _, ds := range p.daemonSets {
			if hp, bad := ds.ports.conflicts(c.ports); bad {
				for pti, m := range c.baseMask {
					if m&ds.mask[pti] != 0 && c.mask[pti]&m == 0 {
						return fmt.Sprintf("host port %s is bound by daemonset pod %s on every node that suits the pod", hp, podKey(ds.pod))
					}
				}
			}
		}
	}
	compatible := false
	for _, pi := range tolerated {
		for _, pti := range p.pools[pi].pts {
			if c.mask[pti] != 0 {
				compatible = true
			}
		}
	}
	if !compatible {
		if len(c.volumes) > 0 {
			base, err := scheduling.PodRequirements(c.rep)
			if err == nil {
				plain := p.masksFor(base)
				for _, pi := range tolerated {
					for _, pti := range p.pools[pi].pts {
						if plain[pti] != 0 {
							return "no instance type satisfies: volume topology (" + c.volumes[0].source + ")"
						}
					}
				}
			}
		}
		return p.requirementReason(c, tolerated)
	}
	// Resources: the largest allocatable any compatible launch offers, per dimension.
	var best scheduling.Resources
	fits := false
	for _, pi := range tolerated {
		for _, pti := range p.pools[pi].pts {
			pt := p.pts[pti]
			for s := 0; s < p.nSlots; s++ {
				if c.mask[pti]&(1<<s) == 0 {
					continue
				}
				best = best.Max(pt.alloc[s])
				if c.req.Fits(pt.alloc[s]) {
					fits = true
				}
			}
		}
	}
	if !fits {
		short := c.req.Exceeding(best)
		if len(short) == 0 {
			return fmt.Sprintf("no instance type has enough allocatable for requests %s at once", c.req)
		}
		names := make([]string, len(short))
		for i, n := range short {
			names[i] = string(n)
		}
		return fmt.Sprintf("no instance type has enough allocatable: %s (pod requests %s)", strings.Join(names, ", "), c.req)
	}
	// Limits.
	var over []string
	overPools := map[string]bool{}
	withinLimits := false
	for _, pi := range tolerated {
		pl := p.pools[pi]
		for _, pti := range pl.pts {
			pt := p.pts[pti]
			for s := 0; s < p.nSlots; s++ {
				if c.mask[pti]&(1<<s) == 0 || !c.req.Fits(pt.alloc[s]) {
					continue
				}
				if ex := pl.usage.exceeded(pt.it.Capacity); len(ex) > 0 {
					for _, e := range ex {
						over = append(over, fmt.Sprintf("%s (nodepool %s)", e, pl.name))
					}
					overPools[pl.name] = true
				} else {
					withinLimits = true
				}
			}
		}
	}
	if !withinLimits {
		if len(overPools) == 1 {
			// One pool: its name adds nothing, name only the limits.
			for i, o := range over {
				over[i] = o[:strings.Index(o, " (nodepool ")]
			}
		}
		return "nodepool limits exceeded: " + strings.Join(dedupe(over), ", ")
	}
	// Topology: the first rule that blocks a fresh node of a launch that otherwise fits.
	for _, pi := range tolerated {
		pl := p.pools[pi]
		for _, pti := range pl.pts {
			pt := p.pts[pti]
			for s := 0; s < p.nSlots; s++ {
				if c.mask[pti]&(1<<s) == 0 || !c.req.Fits(pt.alloc[s]) || !pl.usage.allows(pt.it.Capacity) {
					continue
				}
				doms := p.domainsFor(pt, s, int32(len(p.nodes)), nil)
				if g, blocked := p.blockingRule(c, doms); blocked {
					return "cannot satisfy " + g.desc
				}
			}
		}
	}
	return "no node has room for the pod"
}

// requirementReason names the pod's node requirement no launch meets.
func (p *packer) requirementReason(c *podClass, tolerated []int) string {
	type single struct {
		desc string
		req  scheduling.Requirement
	}
	var singles []single
	sel := c.rep.Spec.NodeSelector
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		singles = append(singles, single{fmt.Sprintf("nodeSelector %s=%s", k, sel[k]),
			scheduling.MustRequirement(k, corev1.NodeSelectorOpIn, sel[k])})
	}
	if aff := c.rep.Spec.Affinity; aff != nil && aff.NodeAffinity != nil && aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) == 1 {
			for _, e := range terms[0].MatchExpressions {
				if r, err := scheduling.NewRequirement(e.Key, e.Operator, e.Values...); err == nil {
					singles = append(singles, single{fmt.Sprintf("node affinity %s %s [%s]", e.Key, e.Operator, strings.Join(e.Values, " ")), r})
				}
			}
		}
	}
	for _, s := range singles {
		alt := scheduling.NewRequirements(s.req)
		usable := p.compatMasks([]scheduling.Requirements{alt}, func(pt *poolType) uint64 { return pt.usable })
		offeredAny := false
		for _, pi := range tolerated {
			for _, pti := range p.pools[pi].pts {
				if usable[pti] != 0 {
					offeredAny = true
				}
			}
		}
		if offeredAny {
			continue
		}
		if p.unavailableOnly(s.req, tolerated) {
			return "no available offering: " + s.desc + " (every matching offering is unavailable)"
		}
		return "no instance type satisfies: " + s.desc
	}
	if len(singles) == 0 {
		return "no instance type satisfies the pod's node requirements"
	}
	return "no instance type satisfies the pod's nodeSelector and node affinity together"
}

// unavailableOnly reports whether a zone or capacity-type requirement is
// met by offerings that exist but are all unavailable.
func (p *packer) unavailableOnly(r scheduling.Requirement, tolerated []int) bool {
	if r.Key() != scheduling.LabelZone && r.Key() != scheduling.LabelCapacityType {
		return false
	}
	for _, pi := range tolerated {
		for _, it := range p.pools[pi].spec.InstanceTypes {
			for _, o := range it.Offerings {
				v := o.Zone
				if r.Key() == scheduling.LabelCapacityType {
					v = o.CapacityType
				}
				if !o.Available && r.Has(v) {
					return true
				}
			}
		}
	}
	return false
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

package planning

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// minNodesPlans plans the empty nodes that bring each pool up to its
// minNodes, counting its registered Nodes that are not going away, its
// nodes in flight and this pass's plans; at most room of them.
func (w *world) minNodesPlans(cluster string, room int, registrationTimeout time.Duration) []activities.NodeLaunchSpec {
	var out []activities.NodeLaunchSpec
	for _, name := range w.poolNames {
		ps := w.pools[name]
		want := int(ps.pool.MinNodesOrZero())
		for room > 0 && ps.liveNodes+ps.inFlight+ps.planned < want {
			options, chosen, considered := w.emptyNodeOptions(ps)
			if len(options) == 0 {
				w.skip("NodePool", name, fmt.Sprintf("spec.minNodes: %d of %d node(s) present, but no instance type of the pool can be launched within its requirements, offerings and limits",
					ps.liveNodes+ps.inFlight+ps.planned, want))
				break
			}
			spec := baseSpec(cluster, ps, registrationTimeout)
			spec.InstanceTypeOptions = options
			spec.Labels = ps.emptyNodeLabels()
			spec.Requirements = specRequirements(ps, options, spec.Labels)
			first := options[0].Offerings[0]
			spec.LaunchReason = fmt.Sprintf(
				"NodePool %s keeps at least %d node(s) and has %d (%d registered, %d in flight, %d planned in this batch); "+
					"empty node of the cheapest of %d allowed instance types: %s %s %s $%.4f/h, %d fallback option(s)",
				name, want, ps.liveNodes+ps.inFlight+ps.planned, ps.liveNodes, ps.inFlight, ps.planned,
				considered, options[0].Name, first.CapacityType, first.Zone, first.PricePerHour, len(options)-1)
			out = append(out, spec)
			room--
			ps.planned++
			ps.addUsage(chosen)
		}
	}
	return out
}

func (ps *poolState) emptyNodeLabels() map[string]string {
	labels := customLabels(ps.reqs, true)
	for k, v := range ps.labels {
		labels[k] = v
	}
	return labels
}

// typeOffer is one offering of one instance type.
type typeOffer struct {
	it       *catalog.InstanceType
	offering catalog.Offering
}

// emptyNodeOptions lists the launch options of an empty node of the pool:
// every instance type its requirements allow whose allocatable holds the
// DaemonSets that would run there and whose capacity stays within the
// pool's limits, with their available offerings in allowed zones and
// capacity types. The capacity-type rule applies across them (spot
// preferred; spot priced above the cheapest on-demand offering dropped).
// Options are cheapest first, at most packer.MaxInstanceTypeOptions;
// chosen is the first option's type and considered how many types were
// allowed.
func (w *world) emptyNodeOptions(ps *poolState) (options []activities.InstanceTypeOption, chosen *catalog.InstanceType, considered int) {
	zoneReq, hasZone := ps.reqs.Get(scheduling.LabelZone)
	ctReq, hasCT := ps.reqs.Get(scheduling.LabelCapacityType)
	taints := ps.pool.Spec.Template.Spec.Taints
	labelsOfEmpty := ps.emptyNodeLabels()
	var offers []typeOffer
	for _, it := range ps.types {
		labels := ps.nodeLabels(it, labelsOfEmpty)
		if _, bad := poolMismatch(ps.reqs, labels); bad {
			continue
		}
		considered++
		if !ps.withinLimits(it) {
			continue
		}
		free := it.Allocatable
		for _, ds := range w.daemonSetPods {
			if runsOn(ds, labels, taints) {
				free = free.Sub(podRequests(ds))
			}
		}
		if free.HasNegative() {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && (!hasZone || zoneReq.Has(o.Zone)) && (!hasCT || ctReq.Has(o.CapacityType)) {
				offers = append(offers, typeOffer{it: it, offering: o})
			}
		}
	}
	offers = preferSpot(offers)
	sort.SliceStable(offers, func(i, j int) bool {
		a, b := offers[i], offers[j]
		if a.offering.Price != b.offering.Price {
			return a.offering.Price < b.offering.Price
		}
		if a.it.Name != b.it.Name {
			return a.it.Name < b.it.Name
		}
		return a.offering.Zone < b.offering.Zone
	})
	index := map[string]int{}
	for _, offer := range offers {
		i, ok := index[offer.it.Name]
		if !ok {
			if len(options) == packer.MaxInstanceTypeOptions {
				continue
			}
			i = len(options)
			index[offer.it.Name] = i
			options = append(options, activities.InstanceTypeOption{Name: offer.it.Name})
			if chosen == nil {
				chosen = offer.it
			}
		}
		options[i].Offerings = append(options[i].Offerings, activities.Offering{
			Zone: offer.offering.Zone, CapacityType: offer.offering.CapacityType, PricePerHour: offer.offering.Price,
		})
	}
	return options, chosen, considered
}

// preferSpot applies catalog.Offerings.PreferSpot's rule to offerings of
// several instance types (that method sees offerings without their type):
// spot offerings priced at most the cheapest on-demand offering, or, when
// there is none, the other offerings.
func preferSpot(offers []typeOffer) []typeOffer {
	cheapestOnDemand, haveOnDemand := 0.0, false
	for _, o := range offers {
		if o.offering.CapacityType == scheduling.CapacityTypeOnDemand && (!haveOnDemand || o.offering.Price < cheapestOnDemand) {
			cheapestOnDemand, haveOnDemand = o.offering.Price, true
		}
	}
	var spot, others []typeOffer
	for _, o := range offers {
		switch {
		case o.offering.CapacityType != scheduling.CapacityTypeSpot:
			others = append(others, o)
		case !haveOnDemand || o.offering.Price <= cheapestOnDemand:
			spot = append(spot, o)
		}
	}
	if len(spot) > 0 {
		return spot
	}
	return others
}

// withinLimits reports whether one more node of type it keeps the pool
// within its limits.
func (ps *poolState) withinLimits(it *catalog.InstanceType) bool {
	for name, limit := range ps.pool.Spec.Limits {
		if name == scheduling.ResourceNodes {
			if ps.usedNodes+1 > limit.Value() {
				return false
			}
			continue
		}
		i, ok := scheduling.LookupResourceIndex(corev1.ResourceName(name))
		if !ok {
			continue // no node has ever had it
		}
		max := limit.Value()
		if i == scheduling.IndexCPU {
			max = limit.MilliValue()
		}
		if ps.used[i]+it.Capacity[i] > max {
			return false
		}
	}
	return true
}

package catalog

import (
	"sort"

	"github.com/millwright/millwright/model/scheduling"
)

// Offering is one place and way an instance type can be launched, with its
// hourly price. Available is false while EC2 reports insufficient capacity.
type Offering struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	Available    bool    `json:"available"`
}

// Requirements describes the offering as node labels (zone, capacity type).
func (o Offering) Requirements() scheduling.Requirements {
	return scheduling.RequirementsFromLabels(map[string]string{
		scheduling.LabelZone:         o.Zone,
		scheduling.LabelCapacityType: o.CapacityType,
	})
}

// Offerings is a list of offerings.
type Offerings []Offering

// Available returns the offerings that can be launched now.
func (os Offerings) Available() Offerings {
	out := make(Offerings, 0, len(os))
	for _, o := range os {
		if o.Available {
			out = append(out, o)
		}
	}
	return out
}

// Compatible returns the offerings whose zone and capacity type meet reqs
// (keys reqs leaves open are unconstrained).
func (os Offerings) Compatible(reqs scheduling.Requirements) Offerings {
	zone, hasZone := reqs.Get(scheduling.LabelZone)
	ct, hasCT := reqs.Get(scheduling.LabelCapacityType)
	out := make(Offerings, 0, len(os))
	for _, o := range os {
		if hasZone && !zone.Has(o.Zone) {
			continue
		}
		if hasCT && !ct.Has(o.CapacityType) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// Cheapest returns the lowest-priced offering (ties: spot first, then zone name).
func (os Offerings) Cheapest() (Offering, bool) {
	if len(os) == 0 {
		return Offering{}, false
	}
	best := os[0]
	for _, o := range os[1:] {
		if offeringLess(o, best) {
			best = o
		}
	}
	return best, true
}

// SortByPrice sorts in place, cheapest first (ties: spot first, then zone).
func (os Offerings) SortByPrice() {
	sort.SliceStable(os, func(i, j int) bool { return offeringLess(os[i], os[j]) })
}

func offeringLess(a, b Offering) bool {
	if a.Price != b.Price {
		return a.Price < b.Price
	}
	if a.CapacityType != b.CapacityType {
		return a.CapacityType == scheduling.CapacityTypeSpot
	}
	return a.Zone < b.Zone
}

// PreferSpot applies Millwright's capacity-type rule to the compatible,
// available offerings of a launch (possibly across several instance types):
// when both capacity types are allowed, spot is preferred, but a spot
// offering priced above the cheapest compatible on-demand offering is
// dropped, since it buys interruption risk for no saving. If no spot
// offering survives, the on-demand offerings are returned.
func (os Offerings) PreferSpot() Offerings {
	cheapestOnDemand, haveOnDemand := 0.0, false
	for _, o := range os {
		if o.CapacityType == scheduling.CapacityTypeOnDemand && (!haveOnDemand || o.Price < cheapestOnDemand) {
			cheapestOnDemand, haveOnDemand = o.Price, true
		}
	}
	var spot, onDemand Offerings
	for _, o := range os {
		switch o.CapacityType {
		case scheduling.CapacityTypeSpot:
			if !haveOnDemand || o.Price <= cheapestOnDemand {
				spot = append(spot, o)
			}
		default:
			onDemand = append(onDemand, o)
		}
	}
	if len(spot) > 0 {
		return spot
	}
	return onDemand
}

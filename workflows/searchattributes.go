package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Search attributes that make node workflows findable in the Temporal UI and
// with `starter nodes`. All are Keyword so they can be filtered exactly
// (e.g. `MillwrightNodePool = "default" AND MillwrightPhase = "Ready"`).
var (
	NodePoolAttribute          = temporal.NewSearchAttributeKeyKeyword("MillwrightNodePool")
	InstanceTypeAttribute      = temporal.NewSearchAttributeKeyKeyword("MillwrightInstanceType")
	ZoneAttribute              = temporal.NewSearchAttributeKeyKeyword("MillwrightZone")
	CapacityTypeAttribute      = temporal.NewSearchAttributeKeyKeyword("MillwrightCapacityType")
	NodeNameAttribute          = temporal.NewSearchAttributeKeyKeyword("MillwrightNodeName")
	InstanceIDAttribute        = temporal.NewSearchAttributeKeyKeyword("MillwrightInstanceID")
	PhaseAttribute             = temporal.NewSearchAttributeKeyKeyword("MillwrightPhase")
	TerminationReasonAttribute = temporal.NewSearchAttributeKeyKeyword("MillwrightTerminationReason")
	// DriftedAttribute is what drifted about the node (AMIDrift,
	// NodePoolDrifted, …) as the disruption workflow last found it; unset
	// on a node that has not drifted.
	DriftedAttribute = temporal.NewSearchAttributeKeyKeyword("MillwrightDrifted")
)

// SearchAttributeTypes lists every custom search attribute Millwright needs a
// namespace to have, by name and type; `starter setup` and the embedded dev
// server register exactly these.
func SearchAttributeTypes() map[string]enumspb.IndexedValueType {
	keys := []temporal.SearchAttributeKeyKeyword{
		NodePoolAttribute, InstanceTypeAttribute, ZoneAttribute, CapacityTypeAttribute,
		NodeNameAttribute, InstanceIDAttribute, PhaseAttribute, TerminationReasonAttribute, DriftedAttribute,
	}
	out := make(map[string]enumspb.IndexedValueType, len(keys))
	for _, k := range keys {
		out[k.GetName()] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	return out
}

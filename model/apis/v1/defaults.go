package v1

// The defaults below are the Go twins of the CRD's +kubebuilder:default
// markers: an object decoded from YAML and passed through SetDefaults equals
// what the API server stores for the same YAML (a test checks this against the
// generated schema).

// Default values applied by SetDefaults and by the CRD.
const (
	DefaultExpireAfter         DurationOrNever     = "720h"
	DefaultConsolidateAfter    DurationOrNever     = "0s"
	DefaultConsolidationPolicy ConsolidationPolicy = ConsolidationPolicyWhenEmptyOrUnderutilized
	DefaultBudgetNodes                             = "10%"
)

// SetDefaults fills every unset field that has a default, in place.
func (np *NodePool) SetDefaults() {
	spec := &np.Spec
	if spec.Template.Spec.ExpireAfter == "" {
		spec.Template.Spec.ExpireAfter = DefaultExpireAfter
	}
	if spec.Disruption.ConsolidateAfter == "" {
		spec.Disruption.ConsolidateAfter = DefaultConsolidateAfter
	}
	if spec.Disruption.ConsolidationPolicy == "" {
		spec.Disruption.ConsolidationPolicy = DefaultConsolidationPolicy
	}
	// Like the API server, default only an absent list: an explicit empty
	// list of budgets would be dropped by JSON's omitempty and so is absent
	// too.
	if len(spec.Disruption.Budgets) == 0 {
		spec.Disruption.Budgets = []Budget{{Nodes: DefaultBudgetNodes}}
	}
	for i := range spec.Disruption.Budgets {
		if spec.Disruption.Budgets[i].Nodes == "" {
			spec.Disruption.Budgets[i].Nodes = DefaultBudgetNodes
		}
	}
}

// SetDefaults fills every unset field that has a default, in place: the
// instance metadata options (IMDSv2 required, hop limit 1).
func (nc *EC2NodeClass) SetDefaults() {
	if nc.Spec.MetadataOptions == nil {
		nc.Spec.MetadataOptions = &MetadataOptions{}
	}
	mo := nc.Spec.MetadataOptions
	if mo.HTTPEndpoint == nil {
		mo.HTTPEndpoint = new(MetadataEndpointEnabled)
	}
	if mo.HTTPProtocolIPv6 == nil {
		mo.HTTPProtocolIPv6 = new(MetadataEndpointDisabled)
	}
	if mo.HTTPPutResponseHopLimit == nil {
		mo.HTTPPutResponseHopLimit = new(DefaultHopLimit)
	}
	if mo.HTTPTokens == nil {
		mo.HTTPTokens = new(MetadataTokensRequired)
	}
}

package disruption

import (
	"fmt"
	"slices"
	"strings"

	"github.com/millwright/millwright/model/scheduling"
)

// DriftKind is what drifted, in Karpenter's names (its drift reasons).
type DriftKind string

const (
	DriftNodePool      DriftKind = "NodePoolDrifted"
	DriftNodeClass     DriftKind = "NodeClassDrifted"
	DriftAMI           DriftKind = "AMIDrift"
	DriftSubnet        DriftKind = "SubnetDrift"
	DriftSecurityGroup DriftKind = "SecurityGroupDrift"
	DriftRequirements  DriftKind = "RequirementsDrifted"
)

// driftOf says how ni drifted from its NodePool and EC2NodeClass ("" when
// it has not), in Karpenter's order: the template hash (Karpenter's
// NodePoolDrifted), the class hash (NodeClassDrifted), then what the class
// resolves to (AMIDrift, SubnetDrift, SecurityGroupDrift), then the pool's
// requirements (RequirementsDrifted).
func (c *computation) driftOf(ni *nodeInfo) (DriftKind, string) {
	n, pool := ni.node, ni.pool.spec
	if n.NodePoolHash != "" && n.NodePoolHashVersion == NodePoolHashVersion &&
		pool.NodePoolHash != "" && n.NodePoolHash != pool.NodePoolHash {
		return DriftNodePool, "NodePool template changed since launch"
	}
	if nc := pool.NodeClass; nc != nil {
		if n.NodeClassHash != "" && n.NodeClassHashVersion == NodeClassHashVersion &&
			nc.Hash != "" && n.NodeClassHash != nc.Hash {
			return DriftNodeClass, fmt.Sprintf("EC2NodeClass %s changed since launch", nc.Name)
		}
		if n.ImageID != "" && len(nc.AMIs) > 0 && !slices.Contains(nc.AMIs, n.ImageID) {
			return DriftAMI, fmt.Sprintf("AMI %s → %s", n.ImageID, strings.Join(nc.AMIs, ", "))
		}
		if n.SubnetID != "" && len(nc.Subnets) > 0 && !slices.Contains(nc.Subnets, n.SubnetID) {
			return DriftSubnet, fmt.Sprintf("subnet %s is no longer selected", n.SubnetID)
		}
		if len(n.SecurityGroupIDs) > 0 && len(nc.SecurityGroups) > 0 && !sameSet(n.SecurityGroupIDs, nc.SecurityGroups) {
			return DriftSecurityGroup, fmt.Sprintf("security groups [%s] → [%s]",
				strings.Join(sortedCopy(n.SecurityGroupIDs), ", "), strings.Join(sortedCopy(nc.SecurityGroups), ", "))
		}
	}
	if m := requirementsDrift(pool, n.Labels); m != "" {
		return DriftRequirements, m
	}
	return "", ""
}

// requirementsDrift: the node's labels no longer meet the pool's
// requirements (Karpenter's RequirementsDrifted).
func requirementsDrift(pool *NodePool, labels map[string]string) string {
	if len(pool.Launch.Requirements) == 0 {
		return ""
	}
	reqs, err := scheduling.RequirementsFromNodeSelector(pool.Launch.Requirements)
	if err != nil {
		return ""
	}
	canonical := scheduling.CanonicalLabels(labels)
	for _, r := range reqs.Items() {
		v, ok := canonical[r.Key()]
		if !r.Matches(v, ok) {
			if ok {
				return fmt.Sprintf("label %s=%s no longer meets the NodePool's requirements", r.Key(), v)
			}
			return fmt.Sprintf("label %s is missing and the NodePool's requirements need it", r.Key())
		}
	}
	return ""
}

func sameSet(a, b []string) bool {
	return slices.Equal(sortedCopy(a), sortedCopy(b))
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

package workflows

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Workflow type names. They are recorded in every history and used by the
// StartNodeWorkflows activity, so they never change once released.
const (
	NodeWorkflowType              = "NodeWorkflow"
	ProvisionerWorkflowType       = "ProvisionerWorkflow"
	DisruptionWorkflowType        = "DisruptionWorkflow"
	DisruptionCommandWorkflowType = "DisruptionCommandWorkflow"
)

// Register registers Millwright's workflows under their type names.
func Register(registry worker.WorkflowRegistry) {
	registry.RegisterWorkflowWithOptions(NodeWorkflow, workflow.RegisterOptions{Name: NodeWorkflowType})
	registry.RegisterWorkflowWithOptions(ProvisionerWorkflow, workflow.RegisterOptions{Name: ProvisionerWorkflowType})
	registry.RegisterWorkflowWithOptions(DisruptionWorkflow, workflow.RegisterOptions{Name: DisruptionWorkflowType})
	registry.RegisterWorkflowWithOptions(DisruptionCommandWorkflow, workflow.RegisterOptions{Name: DisruptionCommandWorkflowType})
}

// DisruptionWorkflowID is the id of a cluster's disruption workflow; there
// is exactly one per cluster.
func DisruptionWorkflowID(cluster string) string {
	return "disruption/" + cluster
}

// DisruptionCommandWorkflowID names the seq-th command of the disruption
// workflow whose first run is firstRunID, so a disruption workflow started
// afresh never collides with an earlier one's closed commands.
func DisruptionCommandWorkflowID(cluster, firstRunID string, seq int64) string {
	sum := sha256.Sum256([]byte(firstRunID))
	return fmt.Sprintf("disruption/%s/command-%x-%d", cluster, sum[:4], seq)
}

// ProvisionerWorkflowID is the id of a cluster's provisioning workflow; there
// is exactly one per cluster.
func ProvisionerWorkflowID(cluster string) string {
	return "provisioner/" + cluster
}

// NodeWorkflowID is the id of the workflow that owns one node claim.
func NodeWorkflowID(cluster, nodeClaimName string) string {
	return "node/" + cluster + "/" + nodeClaimName
}

// ParseNodeWorkflowID splits a node workflow id into cluster and node claim
// name.
func ParseNodeWorkflowID(id string) (cluster, nodeClaimName string, err error) {
	rest, ok := strings.CutPrefix(id, "node/")
	if !ok {
		return "", "", fmt.Errorf("workflow id %q: not a node workflow id (want node/<cluster>/<nodeclaim>)", id)
	}
	cluster, nodeClaimName, ok = strings.Cut(rest, "/")
	if !ok || cluster == "" || nodeClaimName == "" || strings.Contains(nodeClaimName, "/") {
		return "", "", fmt.Errorf("workflow id %q: want node/<cluster>/<nodeclaim>", id)
	}
	return cluster, nodeClaimName, nil
}

// nodeClaimSuffixAlphabet is lowercase alphanumerics without look-alikes, so
// names are valid Kubernetes names and easy to read aloud.
const nodeClaimSuffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// ReplacementClaimName names the index-th replacement a disruption command
// launches, from the command's workflow id: the command starts it under
// this name and the disruption workflow holds it under the same one while
// the command runs.
func ReplacementClaimName(nodePool, commandID string, index int) string {
	return NodeClaimName(nodePool, commandID, 0, index)
}

// NodeClaimName names a planned node deterministically from where it was
// planned: the provisioner's first run id, the batch sequence number (carried
// across continue-as-new) and the plan's index in the batch. A replayed or
// retried batch therefore derives the same names, and the StartNodeWorkflows
// conflict policy turns a second start into a no-op instead of a second
// instance. A provisioner started afresh has a new first run id, so its names
// never collide with closed node workflows of an earlier provisioner.
func NodeClaimName(nodePool, provisionerFirstRunID string, batch int64, index int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", provisionerFirstRunID, batch, index))
	suffix := make([]byte, 8)
	for i := range suffix {
		suffix[i] = nodeClaimSuffixAlphabet[int(sum[i])%len(nodeClaimSuffixAlphabet)]
	}
	return nodePool + "-" + string(suffix)
}

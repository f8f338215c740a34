package activities

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Node phases as the UpsertNodeClaim activity receives them: the values of
// workflows.Phase (this package cannot import workflows; a test there keeps
// both lists equal).
const (
	NodePhaseLaunching    = "Launching"
	NodePhaseRegistering  = "Registering"
	NodePhaseInitializing = "Initializing"
	NodePhaseReady        = "Ready"
	NodePhaseDraining     = "Draining"
	NodePhaseTerminating  = "Terminating"
	NodePhaseTerminated   = "Terminated"
)

// NodePhaseLeaving reports whether phase is on the way out (Draining,
// Terminating, Terminated).
func NodePhaseLeaving(phase string) bool {
	return phase == NodePhaseDraining || phase == NodePhaseTerminating || phase == NodePhaseTerminated
}

// UpsertNodeClaimRequest is a node workflow's state at the moment it
// entered Phase, for its NodeClaim (the mirror `kubectl get nodeclaims`
// shows). Everything in it comes from the workflow, which stays the source
// of truth.
type UpsertNodeClaimRequest struct {
	NodeClaimName string `json:"nodeClaimName"`
	WorkflowID    string `json:"workflowID"`
	NodePool      string `json:"nodePool"`
	NodeClassName string `json:"nodeClassName"`
	// Phase is the phase just entered; At is when (workflow time).
	Phase string    `json:"phase"`
	At    time.Time `json:"at"`

	// Spec of the node claim, from the launch spec.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are merged into the NodeClaim's: the launch spec's and
	// the drift stamps (hashes, AMI, subnet, security groups).
	Annotations   map[string]string                `json:"annotations,omitempty"`
	Requirements  []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
	Taints        []corev1.Taint                   `json:"taints,omitempty"`
	StartupTaints []corev1.Taint                   `json:"startupTaints,omitempty"`
	ExpireAfter   OptionalDuration                 `json:"expireAfter"`
	// TerminationGracePeriod bounds the drain (Never: wait for ever); it
	// decides the termination_mode metric label.
	TerminationGracePeriod OptionalDuration `json:"terminationGracePeriod"`
	// PodKeys are the pods the node was launched for; entering Launching,
	// each is told it is nominated to this node claim.
	PodKeys []string `json:"podKeys,omitempty"`

	// What the workflow knows so far; zero until known.
	Instance      *LaunchResponse `json:"instance,omitempty"`
	NodeName      string          `json:"nodeName,omitempty"`
	CreatedAt     time.Time       `json:"createdAt"`
	RegisteredAt  time.Time       `json:"registeredAt,omitzero"`
	InitializedAt time.Time       `json:"initializedAt,omitzero"`
	// Termination is why the node leaves, once decided.
	Termination *NodeClaimTermination `json:"termination,omitempty"`
	// Drift is what the disruption workflow last found drifted (the
	// Drifted condition, True with the drift kind as its reason); nil: not
	// drifted, and a Drifted condition is removed.
	Drift *NodeClaimCause `json:"drift,omitempty"`
	// Disruption is the disruption command holding the node (the
	// DisruptionReason condition, True with the command's reason); nil:
	// none, and a DisruptionReason condition is removed.
	Disruption *NodeClaimCause `json:"disruption,omitempty"`
}

// NodeClaimCause is why a condition holds: Reason is a CamelCase word
// (AMIDrift, Underutilized), Message says more (AMI ami-a → ami-b).
type NodeClaimCause struct {
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// NodeClaimTermination is why a node leaves.
type NodeClaimTermination struct {
	// Reason is the workflow's TerminationReason (Empty, Expired,
	// Interrupted, Drained, Deleted, RegistrationTimeout...).
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
	// Voluntary: a disruption Millwright chose (budgets apply), not one
	// forced on it.
	Voluntary bool `json:"voluntary"`
}

// UpsertNodeClaimResponse says what this call changed, so what is counted
// once per transition (metrics, events) is counted once even when the
// activity is retried after a success whose completion was lost: a retry
// finds the phase already recorded and reports no transition.
type UpsertNodeClaimResponse struct {
	// Created: the NodeClaim did not exist and was created.
	Created bool `json:"created,omitempty"`
	// Entered is Phase when the NodeClaim recorded another phase before
	// (or none); empty when it already recorded Phase.
	Entered string `json:"entered,omitempty"`
	// Left is the phase recorded before, and LeftAfter how long the node
	// had been in it; empty for a new NodeClaim or a repeat.
	Left      string        `json:"left,omitempty"`
	LeftAfter time.Duration `json:"leftAfter,omitempty"`
	// Skipped says why nothing was written (the NodeClaim is gone and the
	// node is leaving, so it is not recreated).
	Skipped string `json:"skipped,omitempty"`
}

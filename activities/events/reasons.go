package events

// Event reasons. Where Karpenter publishes the same event, the reason is
// Karpenter's (sigs.k8s.io/karpenter pkg/events), so filters such as
// `kubectl get events --field-selector reason=FailedScheduling` and alerts
// written for Karpenter keep working.
const (
	// Provisioning, on pods and NodePools.
	Nominated                 = "Nominated"
	FailedScheduling          = "FailedScheduling"
	NoCompatibleInstanceTypes = "NoCompatibleInstanceTypes"

	// A node's lifecycle, on its NodeClaim and (once registered) its Node.
	Launched                  = "Launched"
	Registered                = "Registered"
	Initialized               = "Initialized"
	InsufficientCapacityError = "InsufficientCapacityError"
	NodeClassNotReady         = "NodeClassNotReady"
	FailedLaunch              = "FailedLaunch"
	RegistrationTimeout       = "RegistrationTimeout"
	InitializationTimeout     = "InitializationTimeout"
	Terminating               = "Terminating"
	Terminated                = "Terminated"

	// Termination (drain), on Nodes, NodeClaims and pods.
	Draining                       = "Draining"
	Disrupted                      = "Disrupted"
	Evicted                        = "Evicted"
	FailedDraining                 = "FailedDraining"
	TerminationGracePeriodExpiring = "TerminationGracePeriodExpiring"
	TerminationFailed              = "FailedTermination"

	// Disruption, on Nodes, NodeClaims and NodePools.
	DisruptionBlocked          = "DisruptionBlocked"
	DisruptionLaunching        = "DisruptionLaunching"
	DisruptionTerminating      = "DisruptionTerminating"
	DisruptionWaitingReadiness = "DisruptionWaitingReadiness"
	Unconsolidatable           = "Unconsolidatable"

	// NodePool settings Millwright refuses or does not honour.
	ValidationFailed   = "ValidationFailed"
	UnsupportedSetting = "UnsupportedSetting"
)

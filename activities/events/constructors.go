package events

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/flowcontrol"
)

// NominationRateLimiter bounds Nominated events across every pod: 5 a second
// with bursts of 10, as Karpenter does.
var NominationRateLimiter = flowcontrol.NewTokenBucketRateLimiter(5, 10)

// maxMessageLength keeps event messages readable (and under the API's 1 KiB
// note limit with room to spare).
const maxMessageLength = 300

func truncate(message string) string {
	if len(message) <= maxMessageLength {
		return message
	}
	return message[:maxMessageLength-3] + "..."
}

// PodNominated says which node claim (and Node, when known) a pod should
// land on. Deduplicated per pod and node claim, rate limited.
func PodNominated(pod runtime.Object, podUID, nodeClaim, node string) Event {
	var on []string
	if nodeClaim != "" {
		on = append(on, "nodeclaim/"+nodeClaim)
	}
	if node != "" {
		on = append(on, "node/"+node)
	}
	return Event{
		InvolvedObject: pod,
		Type:           corev1.EventTypeNormal,
		Reason:         Nominated,
		Message:        "Pod should schedule on: " + strings.Join(on, ", "),
		DedupeValues:   []string{podUID, nodeClaim},
		RateLimiter:    NominationRateLimiter,
	}
}

// PodFailedToSchedule says why no NodePool can take a pod, in the packer's
// words. Deduplicated per pod and reason for 5 minutes.
func PodFailedToSchedule(pod runtime.Object, podUID, reason string) Event {
	return Event{
		InvolvedObject: pod,
		Type:           corev1.EventTypeWarning,
		Reason:         FailedScheduling,
		Message:        truncate("Failed to schedule pod, " + reason),
		DedupeValues:   []string{podUID, reason},
		DedupeTimeout:  5 * time.Minute,
	}
}

// NodeClaimLaunched: the instance exists.
func NodeClaimLaunched(obj runtime.Object, nodeClaim, instanceID, instanceType, zone, capacityType string) Event {
	return Event{
		InvolvedObject: obj,
		Type:           corev1.EventTypeNormal,
		Reason:         Launched,
		Message:        fmt.Sprintf("Launched instance %s: %s in %s (%s)", instanceID, instanceType, zone, capacityType),
		DedupeValues:   []string{nodeClaim},
	}
}

// NodeRegistered: the instance's Node joined and was adopted.
func NodeRegistered(obj runtime.Object, nodeClaim, node string) Event {
	return Event{
		InvolvedObject: obj,
		Type:           corev1.EventTypeNormal,
		Reason:         Registered,
		Message:        "Registered node " + node,
		DedupeValues:   []string{nodeClaim, node},
	}
}

// NodeInitialized: the Node is Ready, its startup taints are gone and its
// extended resources are allocatable.
func NodeInitialized(obj runtime.Object, nodeClaim, node string) Event {
	return Event{
		InvolvedObject: obj,
		Type:           corev1.EventTypeNormal,
		Reason:         Initialized,
		Message:        "Initialized node " + node,
		DedupeValues:   []string{nodeClaim, node},
	}
}

// NodeClaimFailed is a Warning for a node claim that ends before it served:
// reason is InsufficientCapacityError, NodeClassNotReady, FailedLaunch,
// RegistrationTimeout or InitializationTimeout.
func NodeClaimFailed(obj runtime.Object, nodeClaim, reason, detail string) Event {
	return Event{
		InvolvedObject: obj,
		Type:           corev1.EventTypeWarning,
		Reason:         reason,
		Message:        truncate(fmt.Sprintf("NodeClaim %s: %s", nodeClaim, detail)),
		DedupeValues:   []string{nodeClaim},
	}
}

// NodeTerminating: the node is being drained and terminated, and why.
func NodeTerminating(obj runtime.Object, nodeClaim, why string) Event {
	return Event{
		InvolvedObject: obj,
		Type:           corev1.EventTypeNormal,
		Reason:         Terminating,
		Message:        truncate("Terminating: " + why),
		DedupeValues:   []string{nodeClaim},
	}
}

// NodeClaimTerminated: the instance is gone.
func NodeClaimTerminated(obj runtime.Object, nodeClaim, why string) Event {
	return Event{
		InvolvedObject: obj,
		Type:           corev1.EventTypeNormal,
		Reason:         Terminated,
		Message:        truncate("Terminated: " + why),
		DedupeValues:   []string{nodeClaim},
	}
}

// DisruptionBlockedEvent says why a node (or a NodePool) may not be
// disrupted now (a budget, a do-not-disrupt pod, minNodes). Deduplicated per
// object and message for a minute.
func DisruptionBlockedEvent(obj runtime.Object, key, why string) Event {
	return Event{
		InvolvedObject: obj,
		Type:           corev1.EventTypeNormal,
		Reason:         DisruptionBlocked,
		Message:        truncate(why),
		DedupeValues:   []string{key, why},
		DedupeTimeout:  time.Minute,
	}
}

// UnconsolidatableEvent says why a node that may be disrupted is not
// consolidated (no cheaper replacement, not worth the disruption, its pods
// fit nowhere). Deduplicated per node and message for 15 minutes, as
// Karpenter does, since the same verdict comes back every pass.
func UnconsolidatableEvent(obj runtime.Object, key, why string) Event {
	return Event{
		InvolvedObject: obj,
		Type:           corev1.EventTypeNormal,
		Reason:         Unconsolidatable,
		Message:        truncate(why),
		DedupeValues:   []string{key, why},
		DedupeTimeout:  15 * time.Minute,
	}
}

// DisruptionTerminatingEvent: a disruption command is taking the node away
// (its message says why: "Underutilized: 3 nodes → 1 c6i.2xlarge saves
// $0.41/h").
func DisruptionTerminatingEvent(obj runtime.Object, key, command, message string) Event {
	return Event{
		InvolvedObject: obj,
		Type:           corev1.EventTypeNormal,
		Reason:         DisruptionTerminating,
		Message:        truncate("Disrupting Node: " + message),
		DedupeValues:   []string{key, command},
	}
}

// DisruptionLaunchingEvent: a disruption command launches the node's
// replacements before draining it.
func DisruptionLaunchingEvent(obj runtime.Object, key, command, message string) Event {
	return Event{
		InvolvedObject: obj,
		Type:           corev1.EventTypeNormal,
		Reason:         DisruptionLaunching,
		Message:        truncate("Launching replacements: " + message),
		DedupeValues:   []string{key, command},
	}
}

package activities

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.temporal.io/sdk/temporal"
)

// Application error types activities return. Workflows tell failures apart by
// these strings (they cross the Temporal boundary as ApplicationError.Type),
// so they never change once released.
const (
	// InsufficientCapacityErrorType: no offering offered had capacity. Not
	// retryable as is: the workflow removes the offerings (carried as the
	// error's details) and launches again with the rest.
	InsufficientCapacityErrorType = "InsufficientCapacity"
	// InvalidNodeClassErrorType: the NodeClass cannot be used (missing,
	// invalid, selectors matching nothing). Not retryable.
	InvalidNodeClassErrorType = "InvalidNodeClass"
	// ThrottledErrorType: the cloud API throttled us. Retryable, after the
	// jittered delay the error carries.
	ThrottledErrorType = "Throttled"
	// RegistrationTimeoutErrorType: the instance's Node did not register by
	// the deadline. Not retryable.
	RegistrationTimeoutErrorType = "RegistrationTimeout"
	// InitializationTimeoutErrorType: the Node did not become initialized by
	// the deadline. Not retryable.
	InitializationTimeoutErrorType = "InitializationTimeout"
	// LaunchFailedErrorType: EC2 launched nothing and no failure was about
	// capacity (it rejected the request, e.g. the launch template). Not
	// retryable as is: the error's details name the rejected offerings and
	// until when each is backed off.
	LaunchFailedErrorType = "LaunchFailed"
	// NodeGoneErrorType: the Node an activity was asked to adopt was
	// deleted (before it registered, or while it did). Not retryable: a
	// deleted Node does not come back; the workflow terminates its instance.
	NodeGoneErrorType = "NodeGone"
)

// NonRetryableErrorTypes lists the error types no retry policy should retry;
// workflows put it in their activity retry policies as a second guard (the
// errors are also created non-retryable).
var NonRetryableErrorTypes = []string{
	InsufficientCapacityErrorType,
	InvalidNodeClassErrorType,
	RegistrationTimeoutErrorType,
	InitializationTimeoutErrorType,
	NodeGoneErrorType,
}

// NewInsufficientCapacityError reports the offerings that had no capacity.
func NewInsufficientCapacityError(message string, offerings []OfferingKey) error {
	return temporal.NewApplicationErrorWithOptions(message, InsufficientCapacityErrorType,
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{offerings}})
}

// InsufficientCapacityOfferings returns the offerings an InsufficientCapacity
// error names, and whether err is one.
func InsufficientCapacityOfferings(err error) ([]OfferingKey, bool) {
	appErr, ok := applicationError(err, InsufficientCapacityErrorType)
	if !ok {
		return nil, false
	}
	var offerings []OfferingKey
	if appErr.HasDetails() {
		if detailsErr := appErr.Details(&offerings); detailsErr != nil {
			return nil, true
		}
	}
	return offerings, true
}

// IsInsufficientCapacity reports whether err is an InsufficientCapacity error.
func IsInsufficientCapacity(err error) bool {
	_, ok := applicationError(err, InsufficientCapacityErrorType)
	return ok
}

// NewInvalidNodeClassError reports why a NodeClass cannot be used, naming the
// field, e.g. ("default", "spec.subnetSelectorTerms", "matched no subnet").
func NewInvalidNodeClassError(nodeClass, field, problem string) error {
	message := fmt.Sprintf("EC2NodeClass %q: %s: %s", nodeClass, field, problem)
	return temporal.NewNonRetryableApplicationError(message, InvalidNodeClassErrorType, nil)
}

// IsInvalidNodeClass reports whether err is an InvalidNodeClass error.
func IsInvalidNodeClass(err error) bool {
	_, ok := applicationError(err, InvalidNodeClassErrorType)
	return ok
}

// Throttling backoff bounds: attempt 1 waits up to 1s, doubling to 1 minute.
const (
	throttleBaseDelay = time.Second
	throttleMaxDelay  = time.Minute
)

// ThrottledRetryDelay is "full jitter" exponential backoff: a delay drawn
// uniformly (jitter in [0,1)) below min(max, base·2^(attempt-1)). Temporal's
// server-side retry backoff has no jitter, so workers throttled together would
// retry in lockstep; activities return this delay as the error's
// NextRetryDelay instead.
func ThrottledRetryDelay(attempt int32, jitter float64) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	ceiling := throttleMaxDelay
	if attempt < 7 { // 2^6 s > 1 min: beyond that the ceiling is the max.
		ceiling = min(throttleMaxDelay, throttleBaseDelay<<(attempt-1))
	}
	delay := time.Duration(jitter * float64(ceiling))
	// Temporal treats a zero NextRetryDelay as "use the policy", so keep a
	// small floor.
	return max(delay, 100*time.Millisecond)
}

// NewThrottledError wraps a throttling error of operation with a jittered
// retry delay for the given activity attempt (activity.GetInfo(ctx).Attempt).
func NewThrottledError(operation string, cause error, attempt int32) error {
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("%s throttled: %v", operation, cause), ThrottledErrorType,
		temporal.ApplicationErrorOptions{Cause: cause, NextRetryDelay: ThrottledRetryDelay(attempt, rand.Float64())})
}

// IsThrottled reports whether err is a Throttled error.
func IsThrottled(err error) bool {
	_, ok := applicationError(err, ThrottledErrorType)
	return ok
}

// NewRegistrationTimeoutError reports an instance whose Node never registered.
func NewRegistrationTimeoutError(instanceID, providerID string, waited time.Duration) error {
	message := fmt.Sprintf("instance %s (providerID %s) did not register a Node within %s", instanceID, providerID, waited)
	return temporal.NewNonRetryableApplicationError(message, RegistrationTimeoutErrorType, nil)
}

// IsRegistrationTimeout reports whether err is a RegistrationTimeout error.
func IsRegistrationTimeout(err error) bool {
	_, ok := applicationError(err, RegistrationTimeoutErrorType)
	return ok
}

// NewInitializationTimeoutError reports a Node that never became initialized,
// naming what was still missing (e.g. "startup taint example.com/agent").
func NewInitializationTimeoutError(nodeName, missing string, waited time.Duration) error {
	message := fmt.Sprintf("node %s not initialized within %s: %s", nodeName, waited, missing)
	return temporal.NewNonRetryableApplicationError(message, InitializationTimeoutErrorType, nil)
}

// IsInitializationTimeout reports whether err is an InitializationTimeout
// error.
func IsInitializationTimeout(err error) bool {
	_, ok := applicationError(err, InitializationTimeoutErrorType)
	return ok
}

// NewLaunchFailedError reports a launch EC2 rejected for a reason other than
// capacity, with the offerings it rejected and until when each is backed
// off.
func NewLaunchFailedError(message string, rejected []UnavailableOffering) error {
	return temporal.NewApplicationErrorWithOptions(message, LaunchFailedErrorType,
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{rejected}})
}

// LaunchRejectedOfferings returns the offerings a LaunchFailed error names
// (with their backoff), and whether err is one.
func LaunchRejectedOfferings(err error) ([]UnavailableOffering, bool) {
	appErr, ok := applicationError(err, LaunchFailedErrorType)
	if !ok {
		return nil, false
	}
	var rejected []UnavailableOffering
	if appErr.HasDetails() {
		if detailsErr := appErr.Details(&rejected); detailsErr != nil {
			return nil, true
		}
	}
	return rejected, true
}

// IsLaunchFailed reports whether err is a LaunchFailed error.
func IsLaunchFailed(err error) bool {
	_, ok := applicationError(err, LaunchFailedErrorType)
	return ok
}

// NewNodeGoneError reports that the Node nodeName no longer exists.
func NewNodeGoneError(nodeName string, cause error) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the Node %s is gone", nodeName), NodeGoneErrorType, cause)
}

// IsNodeGone reports whether err is a NodeGone error.
func IsNodeGone(err error) bool {
	_, ok := applicationError(err, NodeGoneErrorType)
	return ok
}

func applicationError(err error, errorType string) (*temporal.ApplicationError, bool) {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == errorType {
		return appErr, true
	}
	return nil, false
}

// Package kube owns the Kubernetes side of a node's lifecycle activities:
// waiting for a launched instance's Node to register, adopting it (finalizer,
// labels, taints), waiting for it to initialize, deciding whether a voluntary
// disruption fits the NodePool's budgets, draining it through the Eviction API
// and deleting it.
//
// Every method matches the signature of the activity of the same name in
// package activities (activities.NodeActivities), is idempotent and safe to
// retry, and heartbeats while it waits. The package talks to the API server
// through client-go only; it never reaches the cloud provider (terminating the
// instance is the EC2 activities' job) and never removes a startup taint
// (other systems own those).
package kube

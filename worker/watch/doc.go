// Package watch owns the worker's view of the cluster: client-go informers on
// pods, Nodes and NodePools that turn what they see into Temporal signals —
// provisionable pods to the cluster's provisioning workflow, a node's pod
// count and its deletion to that node's workflow, NodePool changes to the
// provisioner. It never decides anything itself; the workflows do.
//
// Several workers may watch the same cluster at once (HA): every signal here
// is safe to deliver more than once (pod keys are a set, pod counts carry
// their observation time, deletions and reconciles are idempotent).
package watch

// Package packer owns provisioning's core decision: given pending pods,
// DaemonSets, NodePools with their instance types and offerings, and the
// nodes that already exist or are being launched, it decides which pods go
// on existing nodes, which new nodes to launch (NodePool, instance type,
// zone, capacity type) with which pods on them, and which pods cannot be
// scheduled and why. Verify independently checks a plan against every rule.
//
// It is a pure function of its input: no clocks, no I/O, no map-order
// dependence, so the same input always yields the same plan. It knows
// nothing about Kubernetes clients, EC2 or Temporal; callers convert their
// objects into Input (the workload package does so for workload files).
package packer

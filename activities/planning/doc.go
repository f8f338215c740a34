// Package planning owns the Plan activity: it reads the cluster as it is now
// (provisionable pods, Nodes and what is bound to them, DaemonSets,
// NodePools and EC2NodeClasses), the instance types the EC2 provider can
// launch with their offerings and prices, and the nodes the provisioner has
// in flight, runs the packer (model/packer) and turns its node plans into
// activities.NodeLaunchSpec values, each with a human-readable launch reason.
// It also plans the empty nodes that keep every NodePool at its minNodes.
//
// Planning only reads: it never launches, labels or binds anything, so the
// activity is idempotent and safe to retry. A NodePool or EC2NodeClass that
// fails validation is left out and reported (PlanResponse.Skipped and a
// warning naming the field); the other pools keep planning.
//
// The package must not talk to EC2 directly (instance types arrive through
// InstanceTypeSource, implemented by activities/cloud's Provider) nor start
// workflows (that is the StartNodeWorkflows activity's job).
package planning

// Package disruption owns the decision of which of a cluster's nodes
// Millwright takes away voluntarily, and how: Compute turns one snapshot of
// the cluster (Input: live nodes with their pods, pending pods, in-flight
// nodes, NodePools with their instance types, Now) into ordered Commands —
// delete or replace these candidates, for this reason (Empty,
// Underutilized, Drifted, Unhealthy), with these replacement node plans and
// this saving — and a Verdict for every node saying why it is or is not a
// candidate, in Karpenter's words.
//
// It follows Karpenter v1's disruption controller: candidate filtering
// (initialized, not nominated, not deleting, no do-not-disrupt, no blocking
// PDB, consolidateAfter since the last pod event), then per reason in
// Karpenter's order — drift, emptiness, multi-node consolidation (binary
// search over the cheapest-to-disrupt prefix), single-node consolidation —
// each limited by the pool's budget for that reason, then Millwright's
// repack of pairs single-node consolidation kept (repack.go); plus repair verdicts
// (Ready False/Unknown past a toleration, at most 20% of a pool at once).
// Consolidation simulates with the packer (model/packer): the candidates'
// pods over the other nodes' free capacity, in-flight nodes and, for a
// replacement, one new node. The drift hashes of NodePool templates and
// EC2NodeClasses live here too (hash.go), so the code that stamps a node at
// launch and the code that compares stamps agree.
//
// It is pure and fast: no clock (Input.Now), no I/O, no Kubernetes client,
// no Temporal, no map-order dependence. It must not act on anything: the
// disruption workflow (workflows/) reserves, launches and drains; the
// ComputeCommands activity builds the Input from the cluster.
package disruption

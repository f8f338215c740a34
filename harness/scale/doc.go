// Package scale is Millwright's scale benchmark (`make scale`; `make test`
// runs its smallest scenario once and checks only correctness): on the local
// stack with two worker replicas (harness/driver) it creates a scenario's
// whole workload at once and prints how long the pods took to exist and to
// run, the nodes, their $/h and the reserved CPU and memory utilization,
// pod → CreateFleet and pod → Ready latencies (p50/p99; a pod's creation
// joined to the launch time of its node's instance through the node claim),
// then deletes everything and prints the time to zero nodes and the
// instances left, the workers' peak heap and RSS, and the history events per
// node workflow and of the provisioner.
//
// It is a benchmark, not a timed test: the figures are printed, and only
// correctness (every pod Running, nothing left) fails a run.
package scale

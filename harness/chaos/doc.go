// Package chaos is Millwright's chaos suite (`make chaos`; a short seeded
// run is part of `make test`): the shipped binaries on the local stack —
// two worker replicas on one task queue, the Temporal server as its own
// process on a SQLite file, the control plane, the EC2/SQS emulator
// (harness/driver) — under a seeded nemesis, while a workload churns node
// lifecycles, and an invariant checker that samples during the run and
// checks everything again after healing and a quiescence window.
//
// The nemesis first sweeps every activity, SIGKILLing the worker that runs
// it before and after its side effect (EC2 side effects are held by the
// emulator on either side of the call, so the kill lands on the side it
// means), then injects random faults: worker kills, Temporal server
// restarts on the same database, kube-apiserver restarts, EC2 throttling,
// insufficient capacity per offering, 5xx, latency, responses lost after a
// successful CreateFleet or TerminateInstances, and spot storms (30% of
// the spot nodes interrupted within 10 s with the 2-minute warning). The
// workload has PDBs with maxUnavailable 0 and minAvailable n-1 and a
// do-not-disrupt pod beside deployments that are scaled, whose nodes are
// deleted and drained.
//
// Every fault, churn step, observation and violation is a line of the
// JSON-lines history (chaos-history.jsonl in the state dir, or
// -chaos.history). The run fails when any invariant counter is not zero
// or fewer than -chaos.lifecycles node lifecycles completed.
package chaos

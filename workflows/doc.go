// Package workflows owns Millwright's durable Temporal workflows: the
// per-cluster provisioning workflow and the per-node lifecycle workflow. It
// holds their signals, updates, queries and search attributes. Workflow code
// here is deterministic; everything that touches the world is an activity in
// package activities.
//
// # Versioning policy
//
// A node workflow lives as long as its node (expireAfter: 720 h by default,
// forever when disabled), and every run of it is replayed by whichever
// worker picks it up next, so a worker upgrade runs new code over histories
// written by the old one. Millwright versions workflow code with
// workflow.GetVersion and named change ids, not with Temporal's Worker
// Versioning:
//
//   - Fixes must reach the nodes already running. Worker Versioning pins a
//     workflow to the build that started it (a month of the old code, and
//     its defects, for every node launched before an upgrade) or moves it
//     to the new build anyway ("auto-upgrade"), which again needs patching
//     to replay safely.
//   - Pinning means running every build that still has open workflows side
//     by side: a Deployment per build in the chart, for as long as the
//     longest-lived node, and a server with the worker-deployment APIs
//     enabled. One Deployment of interchangeable workers is what the chart,
//     the compose file and the local stack run.
//   - A named change is reviewable in one diff and tested: the replay test
//     runs every recorded release's histories against today's code.
//
// The rules:
//
//  1. Every change to what a workflow does — the commands it issues
//     (activities, timers, signals, search attribute and memo upserts,
//     continue-as-new), their order, or a decision taken from recorded
//     results — takes the new path only where changed(ctx, id) is true,
//     with id a constant in versions.go that says what changed. The old
//     path stays, byte for byte, as the other branch. One id per
//     behaviour change; never reuse or rename one.
//
//  2. Activity options (timeouts, retry policies) and activity inputs are
//     not compared on replay, but changing them changes what running nodes
//     do, so they take an id too: the history then shows which path a run
//     took. Only activity implementations, query handlers, log lines and
//     the wording of decisions and memo texts change freely.
//
//  3. `go test ./workflows/` replays every history under testdata/<release>/
//     (TestReplayRecordedHistories). It must stay green; a failure means the
//     change would break running workflows and needs an id.
//
//  4. At each release, record its histories with the release's code and
//     commit them (one file per path: every way out of Ready, continue-as-
//     new, budget refusal, cancellation, ...):
//
//     go test -tags recordhistories -run TestRecordHistories ./workflows/ -args -release=v0.6
//
//  5. An old branch (and the ids and testdata/<release>/ that need it) is
//     removed only once no workflow of that release can still be open:
//     after the longest node lifetime allowed, when every pool sets
//     expireAfter, and never before the next release has recorded its own
//     histories.
//
// # Carried state
//
// NodeState and ProvisionerState travel across continue-as-new in the next
// run's input, and carry a Version: the shape of the state the run that wrote
// it knew. A new run has no history to replay, so it always runs today's
// code; it reads an older Version by filling in what that version did not
// carry (see readNodeState, readProvisionerState). A Version newer than this
// code knows means a worker was rolled back under a newer run: the workflow
// task fails (and Temporal retries it) until a worker that knows the version
// takes it, rather than a worker misreading state it does not understand.
// Bump the Version constant, and add its case to the read function, only
// when what a field means changes or a field's absence would be misread.
package workflows

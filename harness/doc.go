// Package harness is the home of Millwright's long-running harnesses: the
// chaos suite (harness/chaos, `make chaos`) and the scale benchmark
// (harness/scale, `make scale`). They are a concern of their own, apart from
// local/stack (which composes the local stack in-process for `starter dev`
// and the tests) and from e2e (scenarios of one worker): they drive the
// shipped binaries as separate processes — two worker replicas on one task
// queue as the chart deploys them, and a Temporal server that can be
// SIGKILLed and restarted on its database — for thousands of node lifecycles,
// and they measure or judge the whole system rather than one scenario.
//
// harness/driver starts and controls those processes; harness/cmd/temporal is
// the Temporal server as its own process.
package harness

// Package e2e holds Millwright's end-to-end suite: black-box tests of the
// shipped binaries (worker, starter, and the kubectl users type) on the
// local stack (embedded Temporal server and UI, a real Kubernetes control
// plane run by kwok, the EC2/SQS emulator). It sits at the top level, not
// beside any one package, because what it checks belongs to no single
// package: a user's walkthrough across every part at once, with the worker
// running as a real OS process that a test can SIGKILL and restart.
//
// The package has no non-test code. Its test harness (harness_test.go,
// worker_test.go, scenario_test.go) starts one stack and one worker process
// for the whole package in TestMain and gives each scenario its own
// namespace and NodePool; scenarios are the other *_test.go files. Run it
// with
//
//	go test -count=1 -v -timeout 30m ./e2e/
//
// `-short` skips it. When a test fails, the state directory (worker.log,
// the cluster's logs) is kept and its path printed.
package e2e

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
// the cluster's logs) is kept and its path printed; `-args -e2e.keep` keeps
// it after a passing run too.
//
// # Writing a scenario
//
// A scenario is a Test function in its own file:
//
//	func TestSomething(t *testing.T) {
//		s := newScenario(t, "something")          // namespace + tainted NodePool "something"
//		s.createDeployment(t, "app", 2, "500m")    // pods select and tolerate that pool
//		pods := s.waitPodsRunning(t, "app=app", 2, launchTimeout)
//		wf := s.workflowOfNode(t, pods[0].Spec.NodeName)
//		kubectl(t, "delete", "node", wf.NodeName, "--wait=false")
//		result := waitWorkflowResult(t, wf.ID, terminateTimeout)
//		assertTerminated(t, wf.ID, result, workflows.ReasonDeleted)
//	}
//
// Rules: wait with poll (a condition and a deadline), never sleep; give the
// scenario a unique DNS-label name; do not call t.Parallel (scenarios share
// one worker, which some of them kill). The harness logs "scenario NAME
// took D", dumps the scenario's pods, events, node workflows, instances,
// Nodes and the worker log's tail when it fails, deletes its namespace, and
// restarts the worker if the scenario left it dead. Nodes the scenario
// leaves empty are consolidated after 5 s; TestMain's leak check waits for
// them.
package e2e

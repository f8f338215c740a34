package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/temporal"
	"github.com/millwright/millwright/local/temporal/temporaltesting"
	"github.com/millwright/millwright/workflows"
)

// env is the embedded Temporal server (with Millwright's search attributes)
// shared by the tests that operate node workflows. TestSetup… starts its own
// server because it needs one without those attributes.
var env *temporaltesting.Env

func TestMain(m *testing.M) {
	temporaltesting.Main(m, &env, temporal.Options{SearchAttributes: workflows.SearchAttributeTypes()})
}

// cannedActivities implements the activity contract with instant, canned
// answers, so the real workflows run on the real server while the CLI under
// test only talks to Temporal. Drain blocks until release is closed, so a
// drained node stays in Draining long enough to be asked again.
type cannedActivities struct {
	release     chan struct{}
	releaseOnce sync.Once

	mu sync.Mutex
	// noCapacity are instance types whose every offering reports
	// InsufficientCapacity.
	noCapacity map[string]bool
}

func (a *cannedActivities) withoutCapacity(instanceType string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.noCapacity[instanceType] = true
}

func newCannedActivities() *cannedActivities {
	return &cannedActivities{release: make(chan struct{}), noCapacity: map[string]bool{}}
}

func (a *cannedActivities) releaseDrains() { a.releaseOnce.Do(func() { close(a.release) }) }

func cannedInstanceID(claim string) string { return "i-" + claim }
func cannedNodeName(claim string) string   { return "ip-" + claim + ".ec2.internal" }

func (a *cannedActivities) Launch(_ context.Context, req activities.LaunchRequest) (activities.LaunchResponse, error) {
	option := req.Options[0]
	a.mu.Lock()
	full := a.noCapacity[option.Name]
	a.mu.Unlock()
	if full {
		var failed []activities.OfferingKey
		for _, offering := range option.Offerings {
			failed = append(failed, activities.OfferingKey{InstanceType: option.Name, Zone: offering.Zone, CapacityType: offering.CapacityType})
		}
		return activities.LaunchResponse{}, activities.NewInsufficientCapacityError("InsufficientInstanceCapacity for "+option.Name, failed)
	}
	offering := option.Offerings[0]
	return activities.LaunchResponse{
		InstanceID: cannedInstanceID(req.NodeClaimName), InstanceType: option.Name, Zone: offering.Zone,
		CapacityType: offering.CapacityType, PricePerHour: offering.PricePerHour,
		Hostname: cannedNodeName(req.NodeClaimName), PrivateDNSName: cannedNodeName(req.NodeClaimName),
		ProviderID: "aws:///" + offering.Zone + "/" + cannedInstanceID(req.NodeClaimName), LaunchTime: time.Now(),
	}, nil
}

func (a *cannedActivities) WaitForRegistration(_ context.Context, req activities.WaitForRegistrationRequest) (activities.WaitForRegistrationResponse, error) {
	return activities.WaitForRegistrationResponse{NodeName: cannedNodeName(req.NodeClaimName)}, nil
}

func (a *cannedActivities) RegisterNode(context.Context, activities.RegisterNodeRequest) (activities.RegisterNodeResponse, error) {
	return activities.RegisterNodeResponse{}, nil
}

// WaitForInitialization reports pods on the node so it does not start
// empty (and is never consolidated during a test).
func (a *cannedActivities) WaitForInitialization(context.Context, activities.WaitForInitializationRequest) (activities.WaitForInitializationResponse, error) {
	return activities.WaitForInitializationResponse{NonDaemonSetPods: 2}, nil
}

func (a *cannedActivities) AllowDisruption(context.Context, activities.AllowDisruptionRequest) (activities.AllowDisruptionResponse, error) {
	return activities.AllowDisruptionResponse{Allowed: true}, nil
}

func (a *cannedActivities) Drain(ctx context.Context, _ activities.DrainRequest) (activities.DrainResponse, error) {
	select {
	case <-a.release:
		return activities.DrainResponse{Evicted: 2}, nil
	case <-ctx.Done():
		return activities.DrainResponse{}, ctx.Err()
	}
}

func (a *cannedActivities) TerminateInstance(context.Context, activities.TerminateInstanceRequest) (activities.TerminateInstanceResponse, error) {
	return activities.TerminateInstanceResponse{State: "shutting-down"}, nil
}

func (a *cannedActivities) WaitForInstanceTerminated(context.Context, activities.WaitForInstanceTerminatedRequest) (activities.WaitForInstanceTerminatedResponse, error) {
	return activities.WaitForInstanceTerminatedResponse{State: "terminated"}, nil
}

func (a *cannedActivities) DeleteNode(context.Context, activities.DeleteNodeRequest) (activities.DeleteNodeResponse, error) {
	return activities.DeleteNodeResponse{Deleted: true}, nil
}

func (a *cannedActivities) UpsertNodeClaim(_ context.Context, req activities.UpsertNodeClaimRequest) (activities.UpsertNodeClaimResponse, error) {
	return activities.UpsertNodeClaimResponse{Entered: req.Phase}, nil
}

func (a *cannedActivities) ComputeCommands(context.Context, activities.ComputeCommandsRequest) (activities.ComputeCommandsResponse, error) {
	return activities.ComputeCommandsResponse{}, nil
}

func (a *cannedActivities) Plan(context.Context, activities.PlanRequest) (activities.PlanResponse, error) {
	return activities.PlanResponse{}, nil
}

func (a *cannedActivities) StartNodeWorkflows(context.Context, activities.StartNodeWorkflowsRequest) (activities.StartNodeWorkflowsResponse, error) {
	return activities.StartNodeWorkflowsResponse{}, nil
}

// operateFixture is one test's slice of the shared server: its own task
// queue and cluster name, a worker running the real workflows on canned
// activities, and the connection flags for the CLI.
type operateFixture struct {
	t          *testing.T
	ctx        context.Context
	cluster    string
	taskQueue  string
	activities *cannedActivities
}

func newOperateFixture(t *testing.T) *operateFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	for _, name := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_CERT",
		"TEMPORAL_TLS_KEY", "TEMPORAL_TLS_CA", "TEMPORAL_TLS_SERVER_NAME", "MILLWRIGHT_CLUSTER_NAME", "MILLWRIGHT_TASK_QUEUE"} {
		t.Setenv(name, "")
	}
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	f := &operateFixture{
		t: t, ctx: ctx,
		cluster:    "cluster-" + name,
		taskQueue:  "starter-" + name,
		activities: newCannedActivities(),
	}
	w := worker.New(env.Client, f.taskQueue, worker.Options{})
	workflows.Register(w)
	activities.Register(w, f.activities)
	if err := w.Start(); err != nil {
		t.Fatalf("starting the test worker: %v", err)
	}
	// Release blocked drains before stopping the worker, so Stop does not
	// wait on them.
	t.Cleanup(func() { w.Stop() })
	t.Cleanup(f.activities.releaseDrains)
	return f
}

// connectionArgs are the flags pointing the CLI at the shared server.
func (f *operateFixture) connectionArgs() []string {
	return []string{"--address", env.Server.FrontendAddr(), "--namespace", env.Server.Namespace()}
}

// run runs `starter args... <connection flags>` and fails the test on error.
func (f *operateFixture) run(args ...string) string {
	f.t.Helper()
	return runStarter(f.ctx, f.t, append(args, f.connectionArgs()...)...)
}

func (f *operateFixture) runErr(args ...string) (string, error) {
	return runStarterErr(f.ctx, append(args, f.connectionArgs()...)...)
}

// nodeSpec builds a valid launch spec for claim; options tweak it.
func (f *operateFixture) nodeSpec(claim string, options ...func(*activities.NodeLaunchSpec)) activities.NodeLaunchSpec {
	spec := activities.NodeLaunchSpec{
		Cluster: f.cluster, NodeClaimName: claim, NodePool: "general", NodeClassName: "default",
		InstanceTypeOptions: []activities.InstanceTypeOption{
			{Name: "m5.large", Offerings: []activities.Offering{{Zone: "us-east-1a", CapacityType: activities.CapacityTypeSpot, PricePerHour: 0.035}}},
			{Name: "m5.xlarge", Offerings: []activities.Offering{{Zone: "us-east-1b", CapacityType: activities.CapacityTypeOnDemand, PricePerHour: 0.192}}},
		},
		PodKeys:      []string{"shop/web-1", "shop/web-2"},
		LaunchReason: "2 pending pod(s) fit m5.large, the cheapest option",
	}
	for _, option := range options {
		option(&spec)
	}
	return spec
}

// startNode starts a node workflow the way StartNodeWorkflows does.
func (f *operateFixture) startNode(spec activities.NodeLaunchSpec) client.WorkflowRun {
	f.t.Helper()
	id := workflows.NodeWorkflowID(spec.Cluster, spec.NodeClaimName)
	run, err := env.Client.ExecuteWorkflow(f.ctx, client.StartWorkflowOptions{ID: id, TaskQueue: f.taskQueue}, workflows.NodeWorkflowType, spec)
	if err != nil {
		f.t.Fatalf("starting %s: %v", id, err)
	}
	f.t.Cleanup(func() {
		_ = env.Client.TerminateWorkflow(context.Background(), id, "", "test over")
	})
	return run
}

// waitUntil polls condition (against the real server) until it holds or
// the deadline passes; visibility is eventually consistent.
func (f *operateFixture) waitUntil(what string, condition func() (bool, string)) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		ok, detail := condition()
		if ok {
			return
		}
		last = detail
		select {
		case <-f.ctx.Done():
			f.t.Fatalf("waiting for %s: %v (last: %s)", what, f.ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
	f.t.Fatalf("waiting for %s: still not after 30s; last: %s", what, last)
}

// listedNodes runs `starter nodes -o json` with extra flags.
func (f *operateFixture) listedNodes(extra ...string) []nodeRow {
	f.t.Helper()
	out := f.run(append([]string{"nodes", "-o", "json"}, extra...)...)
	var rows []nodeRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		f.t.Fatalf("nodes -o json: %v\n%s", err, out)
	}
	return rows
}

// waitForPhase waits until `starter nodes` lists claim in phase.
func (f *operateFixture) waitForPhase(claim string, phase workflows.Phase) nodeRow {
	f.t.Helper()
	var found nodeRow
	f.waitUntil(fmt.Sprintf("%s listed as %s", claim, phase), func() (bool, string) {
		for _, row := range f.listedNodes("--cluster-name", f.cluster, "--all") {
			if row.NodeClaim == claim {
				found = row
				return row.Phase == string(phase), "phase " + row.Phase
			}
		}
		return false, "not listed"
	})
	return found
}

func TestNodesListsNodeWorkflowsByAttributes(t *testing.T) {
	f := newOperateFixture(t)
	f.startNode(f.nodeSpec("general-aaaa"))
	f.startNode(f.nodeSpec("gpu-bbbb", func(s *activities.NodeLaunchSpec) {
		s.NodePool = "gpu"
		s.InstanceTypeOptions = []activities.InstanceTypeOption{
			{Name: "g5.xlarge", Offerings: []activities.Offering{{Zone: "us-east-1c", CapacityType: activities.CapacityTypeOnDemand, PricePerHour: 1.006}}},
		}
	}))
	f.waitForPhase("general-aaaa", workflows.PhaseReady)
	f.waitForPhase("gpu-bbbb", workflows.PhaseReady)

	claims := func(rows []nodeRow) []string {
		var names []string
		for _, row := range rows {
			names = append(names, row.NodeClaim)
		}
		return names
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "cluster", args: []string{"--cluster-name", f.cluster}, want: []string{"general-aaaa", "gpu-bbbb"}},
		{name: "pool", args: []string{"--cluster-name", f.cluster, "--pool", "gpu"}, want: []string{"gpu-bbbb"}},
		{name: "phase in any case", args: []string{"--cluster-name", f.cluster, "--phase", "ready"}, want: []string{"general-aaaa", "gpu-bbbb"}},
		{name: "other phase", args: []string{"--cluster-name", f.cluster, "--phase", "Draining"}, want: nil},
		{name: "other cluster", args: []string{"--cluster-name", f.cluster + "-other"}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := claims(f.listedNodes(tt.args...)); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("nodes %v listed %v, want %v", tt.args, got, tt.want)
			}
		})
	}

	table := f.run("nodes", "--cluster-name", f.cluster)
	t.Logf("nodes:\n%s", table)
	for _, want := range []string{
		"NODE CLAIM", "AGE",
		"general-aaaa", cannedNodeName("general-aaaa"), "Ready", "general", "m5.large", "us-east-1a", "spot", cannedInstanceID("general-aaaa"),
		"gpu-bbbb", "g5.xlarge", "on-demand",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestNodesRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"nodes", "--phase", "Sleeping"}, wantErr: "--phase \"Sleeping\": want one of Launching"},
		{args: []string{"nodes", "--pool", "a'b"}, wantErr: "--pool"},
		{args: []string{"nodes", "-o", "yaml"}, wantErr: "--output \"yaml\""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := runStarterErr(context.Background(), append(tt.args, "--address", "127.0.0.1:1")...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNodesNamesUnreachableTemporal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Port 1 on loopback refuses connections.
	_, err := runStarterErr(ctx, "nodes", "--address", "127.0.0.1:1", "--timeout", "5s")
	if err == nil || !strings.Contains(err.Error(), "Temporal at 127.0.0.1:1") {
		t.Errorf("error = %v, want one naming Temporal at 127.0.0.1:1", err)
	}
}

func TestNodesTableFormatting(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	row := func(cluster, claim, status string) nodeRow {
		return nodeRow{Cluster: cluster, NodeClaim: claim, Phase: "Ready", Pool: "general", Status: status, StartTime: now.Add(-90 * time.Minute)}
	}
	running := enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING.String()
	tests := []struct {
		name    string
		rows    []nodeRow
		want    []string
		notWant []string
	}{
		{
			name:    "one cluster, launching node without instance",
			rows:    []nodeRow{row("a", "general-1", running)},
			want:    []string{"NODE CLAIM", "general-1", "<none>", "Ready", "90m"},
			notWant: []string{"CLUSTER"},
		},
		{
			name: "several clusters",
			rows: []nodeRow{row("a", "general-1", running), row("b", "general-1", running)},
			want: []string{"CLUSTER  NODE CLAIM", "a        general-1", "b        general-1"},
		},
		{
			name: "closed workflow says how it closed",
			rows: []nodeRow{func() nodeRow {
				r := row("a", "general-2", enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED.String())
				r.Phase = "Draining"
				return r
			}()},
			want: []string{"Draining (terminated)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			if err := writeNodesTable(&out, tt.rows, now); err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, out.String())
				}
			}
			for _, notWant := range tt.notWant {
				if strings.Contains(out.String(), notWant) {
					t.Errorf("table has %q:\n%s", notWant, out.String())
				}
			}
		})
	}
}

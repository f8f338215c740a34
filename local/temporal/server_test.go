package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	localtemporal "github.com/millwright/millwright/local/temporal"
	"github.com/millwright/millwright/local/temporal/namespacesetup"
	"github.com/millwright/millwright/local/temporal/temporaltesting"
	"github.com/millwright/millwright/workflows"
)

// env is the one server this package's tests share: in memory, free ports,
// UI on, Millwright's search attributes registered.
var env *temporaltesting.Env

func TestMain(m *testing.M) {
	temporaltesting.Main(m, &env, localtemporal.Options{
		UIAddr:           "127.0.0.1:0",
		SearchAttributes: workflows.SearchAttributeTypes(),
	})
}

// visibilityDeadline bounds polls of visibility, which is eventually
// consistent (the record is written after the workflow event).
const visibilityDeadline = 30 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Workflows and activities the tests run on a real worker.

func greetWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var greeting string
	err := workflow.ExecuteActivity(ctx, greetActivity, name).Get(ctx, &greeting)
	return greeting, err
}

func greetActivity(ctx context.Context, name string) (string, error) {
	return "hello " + name + " from " + activity.GetInfo(ctx).ActivityType.Name, nil
}

// upsertKeywordsWorkflow sets each Keyword search attribute of values.
func upsertKeywordsWorkflow(ctx workflow.Context, values map[string]string) error {
	var updates []sdktemporal.SearchAttributeUpdate
	for _, name := range slices.Sorted(maps.Keys(values)) {
		updates = append(updates, sdktemporal.NewSearchAttributeKeyKeyword(name).ValueSet(values[name]))
	}
	return workflow.UpsertTypedSearchAttributes(ctx, updates...)
}

const approveSignal = "approve"

// waitForApprovalWorkflow completes once it is signalled.
func waitForApprovalWorkflow(ctx workflow.Context) (string, error) {
	workflow.GetSignalChannel(ctx, approveSignal).Receive(ctx, nil)
	return "approved", nil
}

// startWorker runs a worker for the test's own task queue, so tests sharing
// the server never take each other's tasks.
func startWorker(t *testing.T, c client.Client) string {
	t.Helper()
	taskQueue := "test-" + strings.ReplaceAll(t.Name(), "/", "-")
	w := worker.New(c, taskQueue, worker.Options{WorkflowPanicPolicy: worker.FailWorkflow})
	w.RegisterWorkflow(greetWorkflow)
	w.RegisterWorkflow(upsertKeywordsWorkflow)
	w.RegisterWorkflow(waitForApprovalWorkflow)
	w.RegisterActivity(greetActivity)
	if err := w.Start(); err != nil {
		t.Fatalf("starting worker on %s: %v", taskQueue, err)
	}
	t.Cleanup(w.Stop)
	return taskQueue
}

func millwrightAttributeValues(phase string) map[string]string {
	return map[string]string{
		"MillwrightNodePool":          "default",
		"MillwrightInstanceType":      "m5.large",
		"MillwrightZone":              "us-west-2a",
		"MillwrightCapacityType":      "spot",
		"MillwrightNodeName":          "ip-10-0-1-2.ec2.internal",
		"MillwrightInstanceID":        "i-0123456789abcdef0",
		"MillwrightPhase":             phase,
		"MillwrightTerminationReason": "none",
	}
}

func TestWorkflowRunsOnRealWorker(t *testing.T) {
	ctx := testContext(t)
	taskQueue := startWorker(t, env.Client)

	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: taskQueue}, greetWorkflow, "millwright")
	if err != nil {
		t.Fatalf("starting workflow: %v", err)
	}
	var greeting string
	if err := run.Get(ctx, &greeting); err != nil {
		t.Fatalf("workflow result: %v", err)
	}
	if want := "hello millwright from greetActivity"; greeting != want {
		t.Errorf("greeting = %q, want %q", greeting, want)
	}
}

func TestSearchAttributesAreRegisteredAsKeywords(t *testing.T) {
	ctx := testContext(t)
	resp, err := env.Client.OperatorService().ListSearchAttributes(ctx, listSearchAttributesRequest(env.Server.Namespace()))
	if err != nil {
		t.Fatalf("listing search attributes: %v", err)
	}
	for name, wantType := range workflows.SearchAttributeTypes() {
		if got, ok := resp.GetCustomAttributes()[name]; !ok || got != wantType {
			t.Errorf("search attribute %s: listed=%v type=%s, want type %s", name, ok, got, wantType)
		}
	}
}

func TestWorkflowUpsertsAllSearchAttributesAndIsFoundByQuery(t *testing.T) {
	ctx := testContext(t)
	taskQueue := startWorker(t, env.Client)
	values := millwrightAttributeValues("Ready")

	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: taskQueue}, upsertKeywordsWorkflow, values)
	if err != nil {
		t.Fatalf("starting workflow: %v", err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("workflow upserting search attributes failed: %v", err)
	}

	query := fmt.Sprintf(`MillwrightPhase = "Ready" AND MillwrightInstanceType = "m5.large" AND WorkflowId = %q`, run.GetID())
	found := waitForVisibility(ctx, t, env.Client, query)
	for name, want := range values {
		var got string
		payload := found.GetSearchAttributes().GetIndexedFields()[name]
		if err := converter.GetDefaultDataConverter().FromPayload(payload, &got); err != nil || got != want {
			t.Errorf("search attribute %s = %q (decode error %v), want %q", name, got, err, want)
		}
	}
}

func TestUIServesTheAppAndProxiesTheAPI(t *testing.T) {
	ctx := testContext(t)
	base := env.Server.UIURL()
	if base == "" {
		t.Fatal("UIURL is empty although the UI was enabled")
	}

	page := httpGet(ctx, t, base+"/")
	if !strings.Contains(page.contentType, "text/html") || !strings.Contains(strings.ToLower(page.body), "<html") {
		t.Errorf("GET / = %s %q, want the UI's HTML page", page.contentType, truncate(page.body))
	}

	namespaces := httpGet(ctx, t, base+"/api/v1/namespaces")
	var list struct {
		Namespaces []struct {
			NamespaceInfo struct {
				Name string `json:"name"`
			} `json:"namespaceInfo"`
		} `json:"namespaces"`
	}
	if err := json.Unmarshal([]byte(namespaces.body), &list); err != nil {
		t.Fatalf("GET /api/v1/namespaces: %v in %q", err, truncate(namespaces.body))
	}
	var names []string
	for _, ns := range list.Namespaces {
		names = append(names, ns.NamespaceInfo.Name)
	}
	if !slices.Contains(names, env.Server.Namespace()) {
		t.Errorf("GET /api/v1/namespaces lists %v, want it to include %s", names, env.Server.Namespace())
	}
}

// TestUISignalsOverPlainHTTP does what the browser does for "Send a Signal":
// take the CSRF cookie from a page load, echo it in the X-CSRF-Token header.
// It fails if the cookie is marked Secure, since browsers do not keep those on
// http:// pages.
func TestUISignalsOverPlainHTTP(t *testing.T) {
	ctx := testContext(t)
	taskQueue := startWorker(t, env.Client)
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: taskQueue}, waitForApprovalWorkflow)
	if err != nil {
		t.Fatalf("starting workflow: %v", err)
	}

	base := env.Server.UIURL()
	page := httpGet(ctx, t, base+"/")
	var csrf *http.Cookie
	for _, c := range page.cookies {
		if c.Name == "_csrf" {
			csrf = c
		}
	}
	if csrf == nil {
		t.Fatalf("GET / set cookies %v, want a _csrf cookie", page.cookies)
	}
	if csrf.Secure {
		t.Fatal("the UI's _csrf cookie is Secure: browsers drop it on plain HTTP and write actions fail")
	}

	signalURL := fmt.Sprintf("%s/api/v1/namespaces/%s/workflows/%s/signal/%s", base, env.Server.Namespace(), run.GetID(), approveSignal)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, signalURL, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", csrf.Value)
	req.AddCookie(csrf)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", signalURL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s = %d %q, want 200", signalURL, resp.StatusCode, truncate(string(body)))
	}

	var result string
	if err := run.Get(ctx, &result); err != nil || result != "approved" {
		t.Errorf("workflow after UI signal = %q, %v; want approved", result, err)
	}
}

func TestStartReportsATakenPortInsteadOfExiting(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenAddr := taken.Addr().String()

	tests := []struct {
		name    string
		options localtemporal.Options
	}{
		{name: "frontend", options: localtemporal.Options{Ephemeral: true, FrontendAddr: takenAddr, DisableUI: true}},
		{name: "UI", options: localtemporal.Options{Ephemeral: true, FrontendAddr: "127.0.0.1:0", UIAddr: takenAddr}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server, err := localtemporal.Start(testContext(t), tt.options)
			if err == nil {
				_ = server.Stop()
				t.Fatalf("Start with %s on taken %s succeeded", tt.name, takenAddr)
			}
			if !localtemporal.IsPortInUse(err) {
				t.Errorf("error %v: IsPortInUse = false", err)
			}
			if !strings.Contains(err.Error(), takenAddr) || !strings.Contains(err.Error(), tt.name) {
				t.Errorf("error %q does not name the %s address %s", err, tt.name, takenAddr)
			}
		})
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name    string
		options localtemporal.Options
		want    string
	}{
		{name: "file-backed without state dir", options: localtemporal.Options{FrontendAddr: "127.0.0.1:0", DisableUI: true}, want: "StateDir"},
		{name: "unknown log level", options: localtemporal.Options{Ephemeral: true, LogLevel: "chatty"}, want: "LogLevel"},
		{name: "frontend host name", options: localtemporal.Options{Ephemeral: true, FrontendAddr: "example.com:0", DisableUI: true}, want: "frontend address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server, err := localtemporal.Start(testContext(t), tt.options)
			if err == nil {
				_ = server.Stop()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %s", err, tt.want)
			}
		})
	}
}

func TestServerLogsGoToTheGivenLoggerAtTheGivenLevel(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	server, err := localtemporal.Start(testContext(t), localtemporal.Options{
		Ephemeral:    true,
		FrontendAddr: "127.0.0.1:0",
		DisableUI:    true,
		Logger:       zap.New(core),
		LogLevel:     "info",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Stop(); err != nil {
		t.Fatal(err)
	}
	if logs.Len() == 0 {
		t.Fatal("the server logged nothing at info level to the given logger")
	}
	for _, entry := range logs.All() {
		if entry.Level < zapcore.InfoLevel {
			t.Fatalf("entry below the requested level reached the logger: %s %q", entry.Level, entry.Message)
		}
		if entry.LoggerName != "temporal" {
			t.Fatalf("entry from logger %q, want the server's entries under \"temporal\"", entry.LoggerName)
		}
	}
}

func TestEnsureSearchAttributesRefusesToRetype(t *testing.T) {
	ctx := testContext(t)
	_, err := namespacesetup.EnsureSearchAttributes(ctx, env.Client.OperatorService(), env.Client.WorkflowService(), env.Server.Namespace(),
		map[string]enumspb.IndexedValueType{"MillwrightPhase": enumspb.INDEXED_VALUE_TYPE_INT})
	if !namespacesetup.IsSearchAttributeTypeConflict(err) {
		t.Fatalf("error = %v, want a type conflict", err)
	}
}

// TestRestartOnStateDirKeepsNamespaceAttributesAndHistory starts a file-backed
// server with one attribute, completes a workflow, stops, and starts again on
// the same directory and the same ports with all attributes: the ports were
// released, the namespace, the old attribute and the workflow are still
// there, and the new attributes were added to the existing database.
func TestRestartOnStateDirKeepsNamespaceAttributesAndHistory(t *testing.T) {
	ctx := testContext(t)
	stateDir := t.TempDir()
	options := localtemporal.Options{
		StateDir:         stateDir,
		FrontendAddr:     "127.0.0.1:0",
		UIAddr:           "127.0.0.1:0",
		Namespace:        "restart-test",
		SearchAttributes: map[string]enumspb.IndexedValueType{"MillwrightPhase": enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	}

	first, err := localtemporal.Start(ctx, options)
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	workflowID := runUpsertToCompletion(ctx, t, first, map[string]string{"MillwrightPhase": "Terminated"})
	if want := filepath.Join(stateDir, localtemporal.DatabaseFileName); first.DatabaseFile() != want {
		t.Errorf("DatabaseFile = %s, want %s", first.DatabaseFile(), want)
	}
	if _, err := os.Stat(first.DatabaseFile() + "-wal"); err != nil {
		t.Errorf("no write-ahead log next to the database (journal_mode=wal not applied?): %v", err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, localtemporal.LogFileName)); err != nil {
		t.Errorf("server log file: %v", err)
	}
	if err := first.Stop(); err != nil {
		t.Fatalf("stopping first server: %v", err)
	}

	// Same ports again: Stop must have released them.
	options.FrontendAddr = first.FrontendAddr()
	options.UIAddr = strings.TrimPrefix(first.UIURL(), "http://")
	options.SearchAttributes = workflows.SearchAttributeTypes()
	second, err := localtemporal.Start(ctx, options)
	if err != nil {
		t.Fatalf("second start on the same state dir: %v", err)
	}
	defer func() {
		if err := second.Stop(); err != nil {
			t.Errorf("stopping second server: %v", err)
		}
	}()
	c, err := second.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	described, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		t.Fatalf("describing the workflow completed before the restart: %v", err)
	}
	if status := described.GetWorkflowExecutionInfo().GetStatus(); status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("workflow status after restart = %s, want COMPLETED", status)
	}
	waitForVisibility(ctx, t, c, fmt.Sprintf(`MillwrightPhase = "Terminated" AND WorkflowId = %q`, workflowID))

	listed, err := c.OperatorService().ListSearchAttributes(ctx, listSearchAttributesRequest(options.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	for name := range workflows.SearchAttributeTypes() {
		if _, ok := listed.GetCustomAttributes()[name]; !ok {
			t.Errorf("search attribute %s missing after restart with the full set", name)
		}
	}
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: options.Namespace}); err != nil {
		t.Errorf("namespace %s after restart: %v", options.Namespace, err)
	}
}

func runUpsertToCompletion(ctx context.Context, t *testing.T, server *localtemporal.Server, values map[string]string) string {
	t.Helper()
	c, err := server.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	taskQueue := "restart"
	w := worker.New(c, taskQueue, worker.Options{WorkflowPanicPolicy: worker.FailWorkflow})
	w.RegisterWorkflow(upsertKeywordsWorkflow)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: taskQueue}, upsertKeywordsWorkflow, values)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("workflow before restart: %v", err)
	}
	return run.GetID()
}

// BenchmarkStartAndStopEphemeral measures what a test package pays for its
// server: start, namespace and Millwright's attributes ready, stop.
func BenchmarkStartAndStopEphemeral(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		server, err := localtemporal.Start(ctx, localtemporal.Options{
			Ephemeral:        true,
			FrontendAddr:     "127.0.0.1:0",
			DisableUI:        true,
			SearchAttributes: workflows.SearchAttributeTypes(),
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := server.Stop(); err != nil {
			b.Fatal(err)
		}
	}
}

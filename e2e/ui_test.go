package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	enumspb "go.temporal.io/api/enums/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/workflows"
)

// uiTimeout bounds each wait on what the Temporal UI shows: a page load and
// its visibility queries take a few seconds, far more on a loaded machine.
const uiTimeout = 2 * time.Minute

// The Temporal UI's elements the test uses (ui-server v2.54.1; data-testid
// attributes are what the UI's own tests select by).
const (
	uiWorkflowRow       = `tr[data-testid="workflows-summary-configurable-table-row"]`
	uiRawQueryToggle    = `[data-testid="toggle-manual-query"]`
	uiQueryInput        = `[data-testid="workflow-manual-search-input"]`
	uiQuerySearchButton = `[data-testid="workflow-manual-search-button"]`
	uiWorkflowHeading   = `[data-testid="workflow-id-heading"]`
	uiHistoryTab        = `[data-testid="history-tab"]`
	uiEventRow          = `tr[data-testid="event-summary-row"]`
	uiSearchAttrsTab    = `[data-testid="search-attributes-tab"]`
	uiMemoTab           = `[data-testid="memo-tab"]`
	// uiDescendingButton toggles the event history to oldest first (XPath:
	// the button has no test id).
	uiDescendingButton = `//button[normalize-space(.)="Descending"]`
	// uiColumnsStorageKey is the localStorage key under which the UI keeps
	// each namespace's workflow list columns (what its "Configure Columns"
	// drawer edits).
	uiColumnsStorageKey = "namespace-workflow-table-columns"
)

// Viewport heights: the list pages show a handful of rows, so a short
// viewport keeps their screenshots free of empty table; a workflow's page
// gets room for its event history.
const uiListHeight, uiWorkflowPageHeight = 640, 1400

// uiListColumns are the workflow list's columns: the UI's Status and
// Workflow ID, then Millwright's search attributes, so the list reads as a
// table of nodes (and fits the viewport's width).
var uiListColumns = []string{
	"Status", "Workflow ID",
	workflows.NodePoolAttribute.GetName(), workflows.PhaseAttribute.GetName(), workflows.NodeNameAttribute.GetName(),
	workflows.InstanceTypeAttribute.GetName(), workflows.ZoneAttribute.GetName(), workflows.CapacityTypeAttribute.GetName(),
}

// TestTemporalUIShowsNodeWorkflows drives the embedded Temporal UI in
// headless Chromium as an operator would: with two nodes up for a
// deployment, the namespace's workflow list shows their node workflows
// (with Millwright's search attributes as columns); typing
// `MillwrightNodePool="<pool>" AND MillwrightPhase="Ready"` into the UI's
// raw query box narrows the list to exactly those workflows, and a phase
// none of them is in lists none; clicking one opens its page, whose event
// history starts with WorkflowExecutionStarted and schedules the Launch
// activity, and whose search attributes and memo name the node. Each step
// is saved as a screenshot (see browser_test.go).
func TestTemporalUIShowsNodeWorkflows(t *testing.T) {
	s := newScenario(t, "temporal-ui")
	b := newBrowser(t)
	namespace := suite.stack.Temporal.Namespace()
	listURL := suite.stack.Temporal.UIURL() + "/namespaces/" + url.PathEscape(namespace) + "/workflows"

	// Three 3-CPU pods: an m5.2xlarge (the pool's largest type, 8 vCPUs)
	// holds two, so they need two nodes.
	const replicas = 3
	started := time.Now()
	s.createDeployment(t, "ui-nodes", replicas, "3")
	s.waitPodsRunning(t, "app=ui-nodes", replicas, launchTimeout)
	nodes := s.nodes(t)
	if len(nodes) < 2 {
		t.Fatalf("%d nodes for %d pods of 3 CPUs, want at least 2", len(nodes), replicas)
	}
	var ready map[string]nodeWorkflow // by workflow id
	poll(t, time.Minute, "a Ready node workflow per node in visibility", func(ctx context.Context) (bool, error) {
		found, err := suite.listWorkflows(ctx, s.poolQuery())
		ready = map[string]nodeWorkflow{}
		for _, wf := range found {
			if wf.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && wf.Phase == string(workflows.PhaseReady) {
				ready[wf.ID] = wf
			}
		}
		return len(found) == len(nodes) && len(ready) == len(nodes), err
	})
	ids := sortedKeys(ready)
	t.Logf("%d pods → %d Ready nodes and node workflows %v: %s", replicas, len(nodes), ids, time.Since(started).Round(time.Millisecond))
	for _, id := range ids {
		if _, _, err := workflows.ParseNodeWorkflowID(id); err != nil {
			t.Errorf("node workflow id: %v", err)
		}
	}

	// The workflow list, with the Millwright columns, shows the node
	// workflows among the namespace's others (the cluster's provisioner
	// workflow at least).
	uiStarted := time.Now()
	b.resize(uiListHeight)
	b.do("opening the workflow list", chromedp.Navigate(listURL), chromedp.WaitVisible(chromedp.CSS(uiRawQueryToggle)))
	b.showListColumns(namespace, uiListColumns)
	b.do("reopening the workflow list", chromedp.Navigate(listURL), chromedp.WaitVisible(chromedp.CSS(uiRawQueryToggle)))
	all := b.waitList(t, "the workflow list to show the node workflows "+strings.Join(ids, ", "), func(l workflowList) bool {
		return l.Query == "" && l.showsAll(ids)
	})
	assertNodeRows(t, all, ready)
	b.screenshot("workflow-list")
	t.Logf("the workflow list shows the %d node workflows among %s workflows (%s)", len(ids), all.Count, time.Since(uiStarted).Round(time.Millisecond))

	// A search as a user types it narrows the list to exactly this pool's
	// Ready nodes.
	readyQuery := fmt.Sprintf(`%s="%s" AND %s="%s"`, workflows.NodePoolAttribute.GetName(), s.pool, workflows.PhaseAttribute.GetName(), workflows.PhaseReady)
	b.search(listURL, readyQuery)
	filtered := b.waitList(t, "the search "+readyQuery+" to list exactly "+strings.Join(ids, ", "), func(l workflowList) bool {
		return l.Query == readyQuery && slices.Equal(l.ids(), ids) && l.Count == strconv.Itoa(len(ids))
	})
	assertNodeRows(t, filtered, ready)
	if total, err := strconv.Atoi(all.Count); err != nil || total <= len(ids) {
		t.Errorf("the unfiltered list counts %q workflows, the search %s: the search did not narrow it", all.Count, filtered.Count)
	}
	b.screenshot("search-ready-nodes")

	// A phase none of the nodes is in lists none of them. The UI shows "No
	// Workflows Found" only once a fetch returned nothing (while loading it
	// shows placeholder rows), and the list before this search had rows, so
	// the empty state is this query's answer.
	drainingQuery := fmt.Sprintf(`%s="%s" AND %s="%s"`, workflows.NodePoolAttribute.GetName(), s.pool, workflows.PhaseAttribute.GetName(), workflows.PhaseDraining)
	b.search(listURL, drainingQuery)
	b.waitList(t, "the search "+drainingQuery+" to list no workflow", func(l workflowList) bool {
		return l.Query == drainingQuery && len(l.Rows) == 0 && l.Empty && l.Count == "0"
	})
	b.screenshot("search-draining-none")

	// Clicking a node workflow in the filtered list opens its page: the
	// event history, then its search attributes and memo.
	b.search(listURL, readyQuery)
	b.waitList(t, "the search "+readyQuery+" again", func(l workflowList) bool {
		return l.Query == readyQuery && slices.Equal(l.ids(), ids)
	})
	chosen := ready[ids[0]]
	link := uiWorkflowRow + ` a[href*="/workflows/` + url.PathEscape(chosen.ID) + `/"]`
	b.resize(uiWorkflowPageHeight)
	b.do("clicking node workflow "+chosen.ID, chromedp.Click(chromedp.CSS(link)), chromedp.WaitVisible(chromedp.CSS(uiWorkflowHeading)))
	b.waitText(t, "the page of "+chosen.ID, uiWorkflowHeading, func(text string) bool { return strings.Contains(text, chosen.ID) })

	// Oldest first, so the screenshot shows the start and the launch.
	b.do("opening the Event History tab, oldest first",
		chromedp.Click(chromedp.CSS(uiHistoryTab)),
		chromedp.WaitVisible(chromedp.CSS(uiEventRow)),
		chromedp.Click(chromedp.Search(uiDescendingButton)),
		chromedp.MouseEvent(chromedp.MouseMoved, 1, 1),
	)
	var events []string
	poll(t, uiTimeout, "the event history of "+chosen.ID+" to show WorkflowExecutionStarted first and the Launch activity", func(context.Context) (bool, error) {
		var err error
		events, err = evaluate[[]string](b, `Array.from(document.querySelectorAll('`+uiEventRow+`')).map(row => row.innerText.replace(/\s+/g, ' ').trim())`)
		return len(events) > 0 && strings.Contains(events[0], "Workflow Execution Started") &&
			containsEvent(events, "Workflow Execution Started", workflows.NodeWorkflowType) &&
			containsEvent(events, "Activity Task Scheduled", activities.LaunchActivity) &&
			containsEvent(events, "Activity Task Completed"), err
	})
	b.screenshot("node-workflow-history")
	t.Logf("the history of %s shows %d events", chosen.ID, len(events))

	b.do("opening the Search Attributes tab", chromedp.Click(chromedp.CSS(uiSearchAttrsTab)))
	wantAttributes := map[string]string{
		workflows.NodePoolAttribute.GetName():     chosen.NodePool,
		workflows.PhaseAttribute.GetName():        chosen.Phase,
		workflows.NodeNameAttribute.GetName():     chosen.NodeName,
		workflows.InstanceIDAttribute.GetName():   chosen.InstanceID,
		workflows.InstanceTypeAttribute.GetName(): chosen.InstanceType,
		workflows.ZoneAttribute.GetName():         chosen.Zone,
		workflows.CapacityTypeAttribute.GetName(): chosen.CapacityType,
	}
	b.waitText(t, "the search attributes of "+chosen.ID, "main", func(text string) bool {
		for name, value := range wantAttributes {
			if !strings.Contains(text, fmt.Sprintf("%q: %q", name, value)) {
				return false
			}
		}
		return true
	})
	b.screenshot("node-workflow-search-attributes")
	b.do("opening the Memo tab", chromedp.Click(chromedp.CSS(uiMemoTab)))
	b.waitText(t, "the memo of "+chosen.ID, "main", func(text string) bool {
		return strings.Contains(text, fmt.Sprintf("%q:", workflows.MemoLaunchReason))
	})
	t.Logf("the Temporal UI checks took %s", time.Since(uiStarted).Round(time.Millisecond))

	// The nodes empty and terminate, so nothing outlives the scenario.
	emptied := time.Now()
	if err := suite.kube.AppsV1().Deployments(s.namespace).Delete(context.Background(), "ui-nodes", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting Deployment ui-nodes: %v", err)
	}
	for _, id := range ids {
		assertTerminated(t, id, waitWorkflowResult(t, id, terminateTimeout), workflows.ReasonEmpty)
	}
	t.Logf("deployment deleted → every node terminated: %s", time.Since(emptied).Round(time.Millisecond))
}

// workflowList is what the UI's workflow list shows.
type workflowList struct {
	// Count is the heading's workflow count ("3" in "3 Workflows").
	Count string `json:"count"`
	// Empty: the list shows "No Workflows Found".
	Empty bool `json:"empty"`
	// Query is the page address's query parameter: the search the list is
	// for.
	Query   string            `json:"query"`
	Headers []string          `json:"headers"`
	Rows    []workflowListRow `json:"rows"`
}

type workflowListRow struct {
	// ID is the workflow id its link points to.
	ID    string   `json:"id"`
	Cells []string `json:"cells"`
}

// readWorkflowList reads the list from the page: the rows' workflow ids
// from their links (/namespaces/<ns>/workflows/<id>/<run>/...), their cells'
// text, the table's column headers.
const readWorkflowList = `(() => {
	const rows = Array.from(document.querySelectorAll('` + uiWorkflowRow + `'));
	const table = rows.length ? rows[0].closest('table') : null;
	const text = element => element.innerText.replace(/\s+/g, ' ').trim();
	return {
		count: (document.querySelector('[data-testid="workflow-count"]')?.textContent ?? '').trim(),
		empty: document.body.innerText.includes('No Workflows Found'),
		query: new URL(location.href).searchParams.get('query') ?? '',
		headers: table ? Array.from(table.querySelectorAll('thead th')).map(text) : [],
		rows: rows.map(row => {
			const link = row.querySelector('a[href*="/workflows/"]');
			return {
				id: link ? decodeURIComponent(new URL(link.href).pathname.split('/')[4]) : '',
				cells: Array.from(row.querySelectorAll('td')).map(text),
			};
		}),
	};
})()`

// ids are the listed workflow ids, sorted, each once (a workflow that
// continued as new is listed once per run).
func (l workflowList) ids() []string {
	var out []string
	for _, r := range l.Rows {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (l workflowList) showsAll(ids []string) bool {
	listed := l.ids()
	for _, id := range ids {
		if _, found := slices.BinarySearch(listed, id); !found {
			return false
		}
	}
	return true
}

// cell is the text of a row's cell under the column header; ok is false if
// the list has no such column or the row's cells do not line up with the
// headers.
func (l workflowList) cell(row workflowListRow, header string) (string, bool) {
	i := slices.Index(l.Headers, header)
	if i < 0 || len(row.Cells) != len(l.Headers) {
		return "", false
	}
	return row.Cells[i], true
}

func (l workflowList) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "count %q, query %q, empty %v, columns %q", l.Count, l.Query, l.Empty, l.Headers)
	for _, r := range l.Rows {
		fmt.Fprintf(&b, "\n  %s: %q", r.ID, r.Cells)
	}
	return b.String()
}

// waitList polls the page's workflow list until it satisfies done, and
// returns it; the failure shows the last list read.
func (b *browser) waitList(t *testing.T, what string, done func(workflowList) bool) workflowList {
	t.Helper()
	var list workflowList
	var lastErr error
	started := time.Now()
	for deadline := started.Add(uiTimeout); ; {
		list, lastErr = evaluate[workflowList](b, readWorkflowList)
		if lastErr == nil && done(list) {
			return list
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s (error %v); the page %s lists %s", time.Since(started).Round(time.Millisecond), what, lastErr, b.location(), list)
		}
		b.pause()
	}
}

// waitText polls the text of the first element matching selector until
// done accepts it.
func (b *browser) waitText(t *testing.T, what, selector string, done func(string) bool) string {
	t.Helper()
	var text string
	poll(t, uiTimeout, what, func(context.Context) (bool, error) {
		var err error
		text, err = evaluate[string](b, `document.querySelector('`+selector+`')?.innerText ?? ''`)
		if err == nil && !done(text) {
			err = fmt.Errorf("the page %s shows in %s: %.2000s", b.location(), selector, text)
		}
		return err == nil, err
	})
	return text
}

// pause is the interval between two reads of a page, as in poll.
func (b *browser) pause() {
	timer := time.NewTimer(200 * time.Millisecond)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-b.tab.Done():
	}
}

// showListColumns sets the namespace's workflow list columns, as the UI's
// "Configure Columns" drawer would, by writing the preference where the UI
// keeps it (localStorage of the UI's origin, so a page of the UI must be
// open). The next page load shows them.
func (b *browser) showListColumns(namespace string, columns []string) {
	b.t.Helper()
	type column struct {
		Label string `json:"label"`
	}
	var list []column
	for _, c := range columns {
		list = append(list, column{Label: c})
	}
	value, err := json.Marshal(map[string][]column{namespace: list})
	if err != nil {
		b.t.Fatal(err)
	}
	// A JSON string is a JavaScript string literal.
	literal, err := json.Marshal(string(value))
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := evaluate[any](b, fmt.Sprintf("localStorage.setItem(%q, %s)", uiColumnsStorageKey, literal)); err != nil {
		b.t.Fatalf("browser: setting the workflow list columns: %v", err)
	}
}

// search opens the workflow list and searches it the way a user does:
// "View raw query", type the visibility query, click Search.
func (b *browser) search(listURL, query string) {
	b.t.Helper()
	b.do("opening the workflow list", chromedp.Navigate(listURL), chromedp.WaitVisible(chromedp.CSS(uiRawQueryToggle)))
	b.do("searching "+query,
		chromedp.Click(chromedp.CSS(uiRawQueryToggle)),
		chromedp.WaitVisible(chromedp.CSS(uiQueryInput)),
		chromedp.SendKeys(chromedp.CSS(uiQueryInput), query),
		chromedp.Click(chromedp.CSS(uiQuerySearchButton)),
		// Off the buttons, so no tooltip covers the list in screenshots.
		chromedp.MouseEvent(chromedp.MouseMoved, 1, 1),
	)
}

// assertNodeRows checks that the list's row of each node workflow shows its
// search attributes in the Millwright columns.
func assertNodeRows(t *testing.T, list workflowList, want map[string]nodeWorkflow) {
	t.Helper()
	for _, row := range list.Rows {
		wf, ours := want[row.ID]
		if !ours {
			continue
		}
		for column, value := range map[string]string{
			workflows.NodePoolAttribute.GetName():     wf.NodePool,
			workflows.PhaseAttribute.GetName():        wf.Phase,
			workflows.NodeNameAttribute.GetName():     wf.NodeName,
			workflows.InstanceTypeAttribute.GetName(): wf.InstanceType,
			workflows.ZoneAttribute.GetName():         wf.Zone,
			workflows.CapacityTypeAttribute.GetName(): wf.CapacityType,
		} {
			if got, ok := list.cell(row, column); !ok || got != value {
				t.Errorf("the list's row of %s shows %s %q (column found %v), want %q; list: %s", row.ID, column, got, ok, value, list)
			}
		}
	}
}

// containsEvent reports whether an event row shows all the texts (its
// event type, its details).
func containsEvent(rows []string, texts ...string) bool {
	return slices.ContainsFunc(rows, func(row string) bool {
		for _, text := range texts {
			if !strings.Contains(row, text) {
				return false
			}
		}
		return true
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

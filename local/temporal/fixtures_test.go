package temporal_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"k8s.io/apimachinery/pkg/util/wait"
)

func listSearchAttributesRequest(namespace string) *operatorservice.ListSearchAttributesRequest {
	return &operatorservice.ListSearchAttributesRequest{Namespace: namespace}
}

// waitForVisibility polls a visibility query until it finds exactly one
// workflow and returns it. Visibility is eventually consistent, so a poll
// with a deadline is the right wait here.
func waitForVisibility(ctx context.Context, t *testing.T, c client.Client, query string) *workflowpb.WorkflowExecutionInfo {
	t.Helper()
	var found *workflowpb.WorkflowExecutionInfo
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, visibilityDeadline, true, func(ctx context.Context) (bool, error) {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			lastErr = err
			return false, nil
		}
		if len(resp.GetExecutions()) == 1 {
			found = resp.GetExecutions()[0]
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("visibility query %q found nothing within %s (last error: %v)", query, visibilityDeadline, lastErr)
	}
	return found
}

type httpResponse struct {
	contentType string
	body        string
	cookies     []*http.Cookie
}

func httpGet(ctx context.Context, t *testing.T, url string) httpResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %q, want 200", url, resp.StatusCode, truncate(string(body)))
	}
	return httpResponse{contentType: resp.Header.Get("Content-Type"), body: string(body), cookies: resp.Cookies()}
}

func truncate(s string) string {
	const limit = 300
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}

package metrics

import (
	"net/http"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestKubeVerbAndResource(t *testing.T) {
	tests := []struct {
		method, path           string
		wantVerb, wantResource string
	}{
		{http.MethodGet, "/api/v1/nodes", "list", "nodes"},
		{http.MethodGet, "/api/v1/nodes/ip-10-0-1-1", "get", "nodes"},
		{http.MethodPatch, "/api/v1/nodes/ip-10-0-1-1/status", "patch", "nodes/status"},
		{http.MethodGet, "/api/v1/namespaces/default/pods", "list", "pods"},
		{http.MethodPost, "/api/v1/namespaces/default/pods/web-1/eviction", "create", "pods/eviction"},
		{http.MethodDelete, "/api/v1/namespaces/default/pods", "deletecollection", "pods"},
		{http.MethodGet, "/api/v1/namespaces/default", "get", "namespaces"},
		{http.MethodPatch, "/apis/millwright.dev/v1/nodeclaims/default-abc/status", "patch", "nodeclaims/status"},
		{http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/millwright", "update", "leases"},
		{http.MethodDelete, "/api/v1/nodes/ip-10-0-1-1", "delete", "nodes"},
		{http.MethodGet, "/version", "get", "other"},
	}
	for _, tt := range tests {
		verb, resource := kubeVerbAndResource(tt.method, tt.path)
		if verb != tt.wantVerb || resource != tt.wantResource {
			t.Errorf("%s %s = %s %s, want %s %s", tt.method, tt.path, verb, resource, tt.wantVerb, tt.wantResource)
		}
	}
}

// A request is recorded with its duration; a watch is not.
func TestKubeAPITransportRecordsRequestsButNotWatches(t *testing.T) {
	m, err := New(NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakeClock(time.Now())
	transport := m.KubeAPITransport(clock)(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		clock.Step(250 * time.Millisecond)
		return &http.Response{StatusCode: http.StatusOK}, nil
	}))
	for _, url := range []string{"http://api/api/v1/nodes/n1", "http://api/api/v1/nodes?watch=true"} {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := transport.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}
	if got := sampleSum(t, m, "millwright_kube_api_duration_seconds"); got != 0.25 {
		t.Errorf("recorded %v s, want 0.25 s of one get (the watch not recorded)", got)
	}
}

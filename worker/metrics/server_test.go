package metrics

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestServerServesMetricsAndProbes scrapes a real server on a free port.
func TestServerServesMetricsAndProbes(t *testing.T) {
	m, _ := newTestMetrics(t)
	m.NodeLaunched("default", "m5.large", "us-east-1a", "spot")
	readiness := &Readiness{}
	server, err := Listen("127.0.0.1:0", m.Gatherer(), readiness)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- server.Serve(ctx) }()
	base := "http://" + server.Addr().String()

	status, body := get(t, base+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d %s", status, body)
	}
	want := `millwright_nodes_launched_total{capacity_type="spot",instance_type="m5.large",nodepool="default",zone="us-east-1a"} 1`
	if !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q:\n%s", want, body)
	}
	if !strings.Contains(body, "# TYPE millwright_provisioner_plan_duration_seconds histogram") {
		t.Errorf("/metrics lacks the plan duration histogram")
	}

	if status, body := get(t, base+"/healthz"); status != http.StatusOK {
		t.Errorf("/healthz: %d %s", status, body)
	}
	if status, body := get(t, base+"/readyz"); status != http.StatusServiceUnavailable {
		t.Errorf("/readyz before ready: %d %s, want 503", status, body)
	}
	readiness.Set(true)
	if status, body := get(t, base+"/readyz"); status != http.StatusOK {
		t.Errorf("/readyz when ready: %d %s", status, body)
	}

	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the server still answers after its context ended")
	}
}

func TestListenReportsATakenAddress(t *testing.T) {
	m, _ := newTestMetrics(t)
	first, err := Listen("127.0.0.1:0", m.Gatherer(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go first.Serve(ctx) //nolint:errcheck // stopped by cancel
	_, err = Listen(first.Addr().String(), m.Gatherer(), nil)
	if err == nil || !strings.Contains(err.Error(), "--metrics-address") {
		t.Fatalf("second Listen on %s: %v, want an error naming --metrics-address", first.Addr(), err)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

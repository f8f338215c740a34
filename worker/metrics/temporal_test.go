package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestTemporalHandlerReportsOntoTheRegistry: SDK metrics land next to
// Millwright's, with Prometheus names. Close flushes tally's last report, so
// no waiting on its interval is needed.
func TestTemporalHandlerReportsOntoTheRegistry(t *testing.T) {
	registry := prometheus.NewRegistry()
	if _, err := New(registry); err != nil {
		t.Fatal(err)
	}
	handler, closer := NewTemporalHandler(registry, nil)
	tagged := handler.WithTags(map[string]string{"namespace": "default", "task_queue": "millwright"})
	tagged.Counter("temporal_request").Inc(3)
	tagged.Timer("temporal_request_latency").Record(20 * time.Millisecond)
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}

	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, family := range families {
		found[family.GetName()] = true
		if family.GetName() == "temporal_request_total" {
			metric := family.GetMetric()[0]
			if got := metric.GetCounter().GetValue(); got != 3 {
				t.Errorf("temporal_request_total = %v, want 3", got)
			}
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] != "default" || labels["task_queue"] != "millwright" {
				t.Errorf("temporal_request_total labels %v", labels)
			}
		}
	}
	// The SDK's contrib names counters *_total and timers *_seconds.
	for _, name := range []string{"temporal_request_total", "temporal_request_latency_seconds"} {
		if !found[name] {
			t.Errorf("%s not gathered; families: %v", name, found)
		}
	}
}

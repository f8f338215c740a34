package workflows

import (
	"testing"
	"time"
)

func TestNodeWorkflowIDRoundTrip(t *testing.T) {
	id := NodeWorkflowID("prod-eu", "default-bcdfghjk")
	if id != "node/prod-eu/default-bcdfghjk" {
		t.Fatalf("id = %q", id)
	}
	cluster, nodeClaim, err := ParseNodeWorkflowID(id)
	if err != nil || cluster != "prod-eu" || nodeClaim != "default-bcdfghjk" {
		t.Fatalf("parse(%q) = %q, %q, %v", id, cluster, nodeClaim, err)
	}
	for _, bad := range []string{"provisioner/prod-eu", "node/prod-eu", "node//x", "node/c/", "node/c/a/b"} {
		if _, _, err := ParseNodeWorkflowID(bad); err == nil {
			t.Errorf("parse(%q) accepted a malformed id", bad)
		}
	}
	if got := ProvisionerWorkflowID("prod-eu"); got != "provisioner/prod-eu" {
		t.Errorf("provisioner id = %q", got)
	}
}

func TestFormatDuration(t *testing.T) {
	cases := map[time.Duration]string{
		30 * time.Second:                      "30s",
		5 * time.Minute:                       "5m",
		90 * time.Minute:                      "1h30m",
		720 * time.Hour:                       "720h",
		time.Hour + 30*time.Second:            "1h0m30s",
		1500 * time.Millisecond:               "1.5s",
		0:                                     "0s",
		10*time.Minute + 500*time.Millisecond: "10m0.5s",
	}
	for d, want := range cases {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestSearchAttributeTypesListsEveryAttribute(t *testing.T) {
	if got := len(SearchAttributeTypes()); got != 9 {
		t.Errorf("%d search attributes, want 9", got)
	}
}

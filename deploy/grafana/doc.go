// Package grafana owns Millwright's Grafana dashboard (millwright.json:
// node workflows by phase, node claims created, disrupted and terminated,
// phase durations, pod startup, scheduling, NodePool usage, limits and
// allowed disruptions, cloud provider calls, interruption messages) and
// embeds it. Its test checks that every metric the dashboard queries is
// one the worker serves on /metrics.
package grafana

import _ "embed"

// Dashboard is the dashboard's JSON, as Grafana imports it.
//
//go:embed millwright.json
var Dashboard []byte

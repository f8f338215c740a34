// Package metrics owns the worker's Prometheus side: Millwright's own
// collectors (nodes launched and terminated, launch errors by cause,
// offerings out of capacity, provisioning batches, interruption messages,
// cloud API calls), the Temporal SDK's metrics bridged onto the same
// registry, and the HTTP server that exposes them on /metrics next to
// /healthz and /readyz.
//
// Metrics are recorded on the worker's side of Temporal only: by a decorator
// around the registered activities (Instrument), by AWS SDK middleware
// (AWSAPIOptions) and by the interruption poller. Workflow code never
// records here: it is replayed, and must stay deterministic.
//
// Nothing here is global: New registers on the registerer it is given, so
// tests use their own registry.
package metrics

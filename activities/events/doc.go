// Package events owns the Kubernetes Events Millwright publishes: their
// reasons (Karpenter's names wherever Karpenter has the event, so a user's
// `kubectl describe`, alerts and dashboards read the same), one constructor
// per event, and a Recorder that deduplicates and rate-limits them before
// client-go's broadcaster, whose correlator then aggregates and spam-filters
// what still repeats.
//
// Events are best effort: publishing never fails and never blocks on the API
// server (the broadcaster writes asynchronously). They explain what
// Millwright did; nothing reads them back to decide anything, so a lost
// event changes no behaviour.
//
// It must not decide anything itself: callers (activities, watchers) choose
// when an event happens; this package only says how it reads and how often
// it may repeat.
package events

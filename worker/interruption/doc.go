// Package interruption owns the worker's SQS poller: it reads the
// EventBridge events EC2 and AWS Health send to the interruption queue (spot
// interruption warnings, rebalance recommendations, scheduled changes,
// instance state changes), finds the node workflow that owns each instance
// and signals it. Deciding what to do (drain, replace, only record) is the
// node workflow's job.
package interruption

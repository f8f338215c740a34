package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a NodePool's status.
const (
	// ConditionTypeReady is True when every other condition is True.
	ConditionTypeReady = "Ready"
	// ConditionTypeValidationSucceeded is False when the pool breaks a rule
	// only the controller can check (e.g. a budget schedule cron cannot
	// parse).
	ConditionTypeValidationSucceeded = "ValidationSucceeded"
	// ConditionTypeNodeClassReady mirrors the Ready condition of the
	// referenced EC2NodeClass.
	ConditionTypeNodeClassReady = "NodeClassReady"
)

// NodePoolStatus is what Millwright observed about a NodePool.
type NodePoolStatus struct {
	// Resources is the summed capacity of the pool's nodes, including the
	// "nodes" count.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Nodes is the number of nodes the pool owns.
	// +optional
	Nodes int64 `json:"nodes,omitempty"`
	// Conditions are the pool's health and readiness signals.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

package events

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// Object references for events whose caller knows the object by name (and
// UID, which `kubectl describe` matches on: pass it when known).

// PodRef refers to a pod.
func PodRef(namespace, name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: namespace, Name: name, UID: uid}
}

// NodeRef refers to a Node.
func NodeRef(name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name, UID: uid}
}

// NodeClaimRef refers to a NodeClaim.
func NodeClaimRef(name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: apisv1.GroupVersion.String(), Kind: "NodeClaim", Name: name, UID: uid}
}

// NodePoolRef refers to a NodePool.
func NodePoolRef(name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: apisv1.GroupVersion.String(), Kind: "NodePool", Name: name, UID: uid}
}

package kube

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// registrationWaiters wakes WaitForRegistration the moment the Node cache
// sees a Node with the awaited providerID, instead of at its next poll:
// in a 1,000-pod burst the scheduler binds a new node's pods elsewhere
// while its registration waits, so every second between the kubelet's
// Node and the nominations counts. The poll stays as the fallback.
type registrationWaiters struct {
	mu      sync.Mutex
	waiting map[string][]chan struct{}
}

// wait returns a channel closed when a Node with providerID is added or
// updated in the cache, and a func that stops waiting.
func (r *registrationWaiters) wait(providerID string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	if r.waiting == nil {
		r.waiting = map[string][]chan struct{}{}
	}
	r.waiting[providerID] = append(r.waiting[providerID], ch)
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		chans := r.waiting[providerID]
		for i, c := range chans {
			if c == ch {
				r.waiting[providerID] = append(chans[:i:i], chans[i+1:]...)
				break
			}
		}
		if len(r.waiting[providerID]) == 0 {
			delete(r.waiting, providerID)
		}
	}
}

// seen wakes the waiters of obj's providerID (each once).
func (r *registrationWaiters) seen(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok || node.Spec.ProviderID == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ch := range r.waiting[node.Spec.ProviderID] {
		close(ch)
	}
	delete(r.waiting, node.Spec.ProviderID)
}

// handler is the Node informer's event handler feeding seen.
func (r *registrationWaiters) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.seen(obj) },
		UpdateFunc: func(_, obj any) { r.seen(obj) },
	}
}

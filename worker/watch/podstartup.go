package watch

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// PodStartupRecorder receives how long a pod took from creation to
// running (millwright_pods_startup_duration_seconds).
type PodStartupRecorder interface {
	PodStarted(took time.Duration)
}

// WatchPodStartup records, for every pod seen turning Running, the time
// from its creation until then (its Ready condition's transition, else its
// start time). Pods already running when the worker starts are not
// measured: their start was not seen.
func WatchPodStartup(factory informers.SharedInformerFactory, recorder PodStartupRecorder) error {
	_, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			before, ok1 := old.(*corev1.Pod)
			pod, ok2 := obj.(*corev1.Pod)
			if !ok1 || !ok2 || before.Status.Phase == corev1.PodRunning || pod.Status.Phase != corev1.PodRunning {
				return
			}
			if took, ok := startupDuration(pod); ok {
				recorder.PodStarted(took)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("pod startup watcher: %w", err)
	}
	return nil
}

func startupDuration(pod *corev1.Pod) (time.Duration, bool) {
	running := time.Time{}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			running = c.LastTransitionTime.Time
		}
	}
	if running.IsZero() && pod.Status.StartTime != nil {
		running = pod.Status.StartTime.Time
	}
	if running.IsZero() || running.Before(pod.CreationTimestamp.Time) {
		return 0, false
	}
	return running.Sub(pod.CreationTimestamp.Time), true
}

package kube

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// nominationWorkers bounds the pod status patches one registration sends at
// once; the client's rate limiter (shared by the whole worker) bounds them
// further.
const nominationWorkers = 32

// nominatePods sets status.nominatedNodeName to node on each pod of keys
// ("namespace/name") that is not bound yet: the pods the node was launched
// for. kube-scheduler tries a pod's nominated node first (KEP-1923) and,
// while filtering every other pod of the same or lower priority, counts
// nominated pods as already on their node. Without it, the first pods the
// scheduler takes from its queue spread over every new node (LeastAllocated)
// and the pods the plan had packed there no longer fit: they go pending
// again and wait for another batch and launch. With it the scheduler follows the plan while the plan
// still fits, and drops a nomination (it clears the field) when it does not.
//
// A bound pod is left alone: the patch tests that spec.nodeName is unset,
// and the API server refuses it otherwise. Nominations are a hint, not part
// of registration's contract: a failure is logged and the Node is adopted
// anyway. It returns how many pods were nominated.
func (a *Activities) nominatePods(ctx context.Context, node string, keys []string) int {
	if len(keys) == 0 {
		return 0
	}
	patch, err := json.Marshal([]map[string]any{
		// A JSON null tests that the path is absent: the pod is not bound.
		{"op": "test", "path": "/spec/nodeName", "value": nil},
		{"op": "add", "path": "/status/nominatedNodeName", "value": node},
	})
	if err != nil {
		a.logger.Warn("Cannot build the nomination patch", zap.String("node", node), zap.Error(err))
		return 0
	}
	work := make(chan string)
	var (
		wg        sync.WaitGroup
		nominated atomic.Int32
		failures  atomic.Int32
		lastErr   atomic.Value
	)
	for range min(nominationWorkers, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range work {
				namespace, name, ok := strings.Cut(key, "/")
				if !ok {
					continue
				}
				_, err := a.clientset.CoreV1().Pods(namespace).Patch(ctx, name, types.JSONPatchType, patch,
					metav1.PatchOptions{}, "status")
				switch {
				case err == nil:
					nominated.Add(1)
				case apierrors.IsNotFound(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsConflict(err):
					// Gone, or bound (the test failed): nothing to nominate.
				default:
					failures.Add(1)
					lastErr.Store(err.Error())
				}
			}
		}()
	}
	for _, key := range keys {
		if ctx.Err() != nil {
			break
		}
		work <- key
	}
	close(work)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		last, _ := lastErr.Load().(string)
		a.logger.Warn("Could not nominate some pods to their node; the scheduler may place them elsewhere",
			zap.String("node", node), zap.Int32("failed", n), zap.String("lastError", last))
	}
	return int(nominated.Load())
}

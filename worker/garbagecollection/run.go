package garbagecollection

import (
	"context"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/millwright/millwright/activities/kube"
)

// Leader election timings, client-go's usual ones.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// leaseName names the cluster's garbage-collection Lease.
func leaseName(cluster string) string {
	return kube.LeaseName("millwright-gc-", cluster)
}

// Run collects every Interval while this worker holds the cluster's
// garbage-collection Lease, until ctx ends.
func (c *Collector) Run(ctx context.Context) {
	identity := c.opts.Identity
	if identity == "" {
		identity = "millwright-" + uuid.NewString()
	}
	namespace := c.opts.LeaseNamespace
	if namespace == "" {
		namespace = "default"
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metaOf(namespace, leaseName(c.opts.Cluster)),
		Client:     c.opts.Kubernetes.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	for ctx.Err() == nil {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			ReleaseOnCancel: true, Name: "garbage-collection",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: c.collectEvery,
				OnStoppedLeading: func() { c.log.Debug("Not collecting garbage: another worker holds the Lease") },
			},
		})
		if err != nil {
			c.log.Error("Garbage collection cannot elect a leader", zap.Error(err))
			return
		}
		elector.Run(ctx) // returns when leadership is lost or ctx ends
	}
}

// collectEvery collects at once, then every Interval, until ctx ends.
func (c *Collector) collectEvery(ctx context.Context) {
	c.log.Info("Collecting garbage on this worker", zap.Duration("interval", c.opts.Interval), zap.Duration("grace", c.opts.Grace))
	ticker := c.opts.Clock.NewTicker(c.opts.Interval)
	defer ticker.Stop()
	for {
		if _, err := c.Collect(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("Garbage collection pass failed; trying again next interval", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

func metaOf(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

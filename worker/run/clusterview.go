package run

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/millwright/millwright/activities/kube"
	"github.com/millwright/millwright/activities/planning"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// clusterView is the metrics' read of the worker's informer caches.
type clusterView struct {
	nodes corelisters.NodeLister
	pods  corelisters.PodLister
	pools cache.GenericLister
}

func newClusterView(factory informers.SharedInformerFactory, dynamicFactory dynamicinformer.DynamicSharedInformerFactory) *clusterView {
	return &clusterView{
		nodes: factory.Core().V1().Nodes().Lister(),
		pods:  factory.Core().V1().Pods().Lister(),
		pools: dynamicFactory.ForResource(planning.NodePoolResource).Lister(),
	}
}

func (v *clusterView) Nodes() ([]*corev1.Node, error) { return v.nodes.List(labels.Everything()) }
func (v *clusterView) Pods() ([]*corev1.Pod, error)   { return v.pods.List(labels.Everything()) }

func (v *clusterView) NodePools() ([]*apisv1.NodePool, error) {
	objs, err := v.pools.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	pools := make([]*apisv1.NodePool, 0, len(objs))
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var pool apisv1.NodePool
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pool); err != nil {
			continue // the pool watcher reports invalid pools
		}
		pools = append(pools, &pool)
	}
	return pools, nil
}

// servesNodeClaims reports whether the API server serves
// millwright.dev/v1 nodeclaims.
func servesNodeClaims(client kubernetes.Interface) bool {
	resources, err := client.Discovery().ServerResourcesForGroupVersion(apisv1.GroupVersion.String())
	if err != nil {
		return false
	}
	for _, r := range resources.APIResources {
		if r.Name == kube.NodeClaimResource.Resource {
			return true
		}
	}
	return false
}

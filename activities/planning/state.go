package planning

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/utils/clock"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// Resources of Millwright's custom kinds. They have no typed clientset, so
// they are read as unstructured objects and converted to model/apis/v1.
var (
	NodePoolResource     = apisv1.GroupVersion.WithResource("nodepools")
	EC2NodeClassResource = apisv1.GroupVersion.WithResource("ec2nodeclasses")
)

// ClusterState is what planning reads from the cluster. Two implementations
// exist: NewInformerState reads the worker's shared informer caches (cheap,
// and what the worker uses), NewAPIState lists from the API server on every
// call (always fresh; for tools and tests). Returned objects are shared with
// caches and must not be modified.
type ClusterState interface {
	ListPods(ctx context.Context) ([]*corev1.Pod, error)
	ListNodes(ctx context.Context) ([]*corev1.Node, error)
	ListDaemonSets(ctx context.Context) ([]*appsv1.DaemonSet, error)
	// ListPodDisruptionBudgets is read by ComputeCommands only.
	ListPodDisruptionBudgets(ctx context.Context) ([]*policyv1.PodDisruptionBudget, error)
	// ListNamespaces, for the labels pod affinity's namespaceSelector reads.
	ListNamespaces(ctx context.Context) ([]*corev1.Namespace, error)
	// ListPersistentVolumeClaims, ListPersistentVolumes and
	// ListStorageClasses give the pods' volumes' topology.
	ListPersistentVolumeClaims(ctx context.Context) ([]*corev1.PersistentVolumeClaim, error)
	ListPersistentVolumes(ctx context.Context) ([]*corev1.PersistentVolume, error)
	ListStorageClasses(ctx context.Context) ([]*storagev1.StorageClass, error)
	// ListNodePools and ListEC2NodeClasses return the custom resources as
	// stored; the planner decodes, defaults and validates each one, so a
	// malformed object only takes itself out.
	ListNodePools(ctx context.Context) ([]*unstructured.Unstructured, error)
	ListEC2NodeClasses(ctx context.Context) ([]*unstructured.Unstructured, error)
}

// apiState lists straight from the API server, paging through large lists
// with client-go's pager.
type apiState struct {
	clientset kubernetes.Interface
	dynamic   dynamic.Interface
}

// NewAPIState reads the cluster with a List call per kind and per Plan.
func NewAPIState(clientset kubernetes.Interface, dynamicClient dynamic.Interface) ClusterState {
	return &apiState{clientset: clientset, dynamic: dynamicClient}
}

// listPageSize keeps each List response small on large clusters.
const listPageSize = 500

func listAll[T any](ctx context.Context, what string, list func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)) ([]*T, error) {
	var out []*T
	p := pager.New(pager.ListPageFunc(list))
	p.PageSize = listPageSize
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		item, ok := any(obj).(*T)
		if !ok {
			return fmt.Errorf("list %s: got a %T", what, obj)
		}
		out = append(out, item)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return out, nil
}

func (s *apiState) ListPods(ctx context.Context) ([]*corev1.Pod, error) {
	return listAll[corev1.Pod](ctx, "pods", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return s.clientset.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	})
}

func (s *apiState) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	return listAll[corev1.Node](ctx, "nodes", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return s.clientset.CoreV1().Nodes().List(ctx, opts)
	})
}

func (s *apiState) ListDaemonSets(ctx context.Context) ([]*appsv1.DaemonSet, error) {
	return listAll[appsv1.DaemonSet](ctx, "daemonsets", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return s.clientset.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, opts)
	})
}

func (s *apiState) ListPodDisruptionBudgets(ctx context.Context) ([]*policyv1.PodDisruptionBudget, error) {
	return listAll[policyv1.PodDisruptionBudget](ctx, "poddisruptionbudgets", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return s.clientset.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, opts)
	})
}

func (s *apiState) ListNamespaces(ctx context.Context) ([]*corev1.Namespace, error) {
	return listAll[corev1.Namespace](ctx, "namespaces", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return s.clientset.CoreV1().Namespaces().List(ctx, opts)
	})
}

func (s *apiState) ListPersistentVolumeClaims(ctx context.Context) ([]*corev1.PersistentVolumeClaim, error) {
	return listAll[corev1.PersistentVolumeClaim](ctx, "persistentvolumeclaims", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return s.clientset.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, opts)
	})
}

func (s *apiState) ListPersistentVolumes(ctx context.Context) ([]*corev1.PersistentVolume, error) {
	return listAll[corev1.PersistentVolume](ctx, "persistentvolumes", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return s.clientset.CoreV1().PersistentVolumes().List(ctx, opts)
	})
}

func (s *apiState) ListStorageClasses(ctx context.Context) ([]*storagev1.StorageClass, error) {
	return listAll[storagev1.StorageClass](ctx, "storageclasses", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return s.clientset.StorageV1().StorageClasses().List(ctx, opts)
	})
}

func (s *apiState) ListNodePools(ctx context.Context) ([]*unstructured.Unstructured, error) {
	return s.listCustom(ctx, NodePoolResource)
}

func (s *apiState) ListEC2NodeClasses(ctx context.Context) ([]*unstructured.Unstructured, error) {
	return s.listCustom(ctx, EC2NodeClassResource)
}

func (s *apiState) listCustom(ctx context.Context, resource schema.GroupVersionResource) ([]*unstructured.Unstructured, error) {
	return listAll[unstructured.Unstructured](ctx, resource.Resource, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return s.dynamic.Resource(resource).List(ctx, opts)
	})
}

// informerState reads shared informer caches.
type informerState struct {
	pods        corelisters.PodLister
	nodes       corelisters.NodeLister
	daemonSets  appslisters.DaemonSetLister
	pdbs        policylisters.PodDisruptionBudgetLister
	namespaces  corelisters.NamespaceLister
	claims      corelisters.PersistentVolumeClaimLister
	volumes     corelisters.PersistentVolumeLister
	classes     storagelisters.StorageClassLister
	nodePools   cache.GenericLister
	nodeClasses cache.GenericLister
	synced      []cache.InformerSynced
	*podEvents
}

// NewInformerState reads from the informers of factory (Pods, Nodes,
// DaemonSets, PodDisruptionBudgets, Namespaces, PersistentVolumeClaims,
// PersistentVolumes, StorageClasses) and dynamicFactory (NodePools,
// EC2NodeClasses). It registers those informers, so call it before the
// factories' Start; each read waits until the caches have synced (or ctx
// ends). It is a PodEventSource: it records pod events from then on.
func NewInformerState(factory informers.SharedInformerFactory, dynamicFactory dynamicinformer.DynamicSharedInformerFactory) ClusterState {
	pods := factory.Core().V1().Pods()
	nodes := factory.Core().V1().Nodes()
	daemonSets := factory.Apps().V1().DaemonSets()
	pdbs := factory.Policy().V1().PodDisruptionBudgets()
	namespaces := factory.Core().V1().Namespaces()
	claims := factory.Core().V1().PersistentVolumeClaims()
	volumes := factory.Core().V1().PersistentVolumes()
	classes := factory.Storage().V1().StorageClasses()
	nodePools := dynamicFactory.ForResource(NodePoolResource)
	nodeClasses := dynamicFactory.ForResource(EC2NodeClassResource)
	events := newPodEvents(clock.RealClock{})
	// Registering a handler fails only on a stopped informer; the factory
	// has not started yet.
	_, _ = pods.Informer().AddEventHandler(events.podHandler())
	_, _ = nodes.Informer().AddEventHandler(events.nodeHandler())
	return &informerState{
		podEvents:   events,
		pods:        pods.Lister(),
		nodes:       nodes.Lister(),
		daemonSets:  daemonSets.Lister(),
		pdbs:        pdbs.Lister(),
		namespaces:  namespaces.Lister(),
		claims:      claims.Lister(),
		volumes:     volumes.Lister(),
		classes:     classes.Lister(),
		nodePools:   nodePools.Lister(),
		nodeClasses: nodeClasses.Lister(),
		synced: []cache.InformerSynced{
			pods.Informer().HasSynced, nodes.Informer().HasSynced, daemonSets.Informer().HasSynced,
			pdbs.Informer().HasSynced, namespaces.Informer().HasSynced, claims.Informer().HasSynced, volumes.Informer().HasSynced,
			classes.Informer().HasSynced, nodePools.Informer().HasSynced, nodeClasses.Informer().HasSynced,
		},
	}
}

func (s *informerState) waitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return fmt.Errorf("informer caches did not sync: %w", context.Cause(ctx))
	}
	return nil
}

func (s *informerState) ListPods(ctx context.Context) ([]*corev1.Pod, error) {
	if err := s.waitForSync(ctx); err != nil {
		return nil, err
	}
	return s.pods.List(labels.Everything())
}

func (s *informerState) ListNodes(ctx context.Context) ([]*corev1.Node, error) {
	if err := s.waitForSync(ctx); err != nil {
		return nil, err
	}
	return s.nodes.List(labels.Everything())
}

func (s *informerState) ListDaemonSets(ctx context.Context) ([]*appsv1.DaemonSet, error) {
	if err := s.waitForSync(ctx); err != nil {
		return nil, err
	}
	return s.daemonSets.List(labels.Everything())
}

func (s *informerState) ListPodDisruptionBudgets(ctx context.Context) ([]*policyv1.PodDisruptionBudget, error) {
	if err := s.waitForSync(ctx); err != nil {
		return nil, err
	}
	return s.pdbs.List(labels.Everything())
}

func (s *informerState) ListNamespaces(ctx context.Context) ([]*corev1.Namespace, error) {
	if err := s.waitForSync(ctx); err != nil {
		return nil, err
	}
	return s.namespaces.List(labels.Everything())
}

func (s *informerState) ListPersistentVolumeClaims(ctx context.Context) ([]*corev1.PersistentVolumeClaim, error) {
	if err := s.waitForSync(ctx); err != nil {
		return nil, err
	}
	return s.claims.List(labels.Everything())
}

func (s *informerState) ListPersistentVolumes(ctx context.Context) ([]*corev1.PersistentVolume, error) {
	if err := s.waitForSync(ctx); err != nil {
		return nil, err
	}
	return s.volumes.List(labels.Everything())
}

func (s *informerState) ListStorageClasses(ctx context.Context) ([]*storagev1.StorageClass, error) {
	if err := s.waitForSync(ctx); err != nil {
		return nil, err
	}
	return s.classes.List(labels.Everything())
}

func (s *informerState) ListNodePools(ctx context.Context) ([]*unstructured.Unstructured, error) {
	return s.listCustom(ctx, s.nodePools, "nodepools")
}

func (s *informerState) ListEC2NodeClasses(ctx context.Context) ([]*unstructured.Unstructured, error) {
	return s.listCustom(ctx, s.nodeClasses, "ec2nodeclasses")
}

func (s *informerState) listCustom(ctx context.Context, lister cache.GenericLister, what string) ([]*unstructured.Unstructured, error) {
	if err := s.waitForSync(ctx); err != nil {
		return nil, err
	}
	objs, err := lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("list %s: the cache holds a %T", what, obj)
		}
		out = append(out, u)
	}
	return out, nil
}

package disruption_test

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// now is the snapshot time of every test.
var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const zone = "zone-a"

// instanceType is a type with allocatable = capacity, offered on-demand and
// spot in zone-a.
func instanceType(name string, cpu, memGi int, onDemand, spot float64) *catalog.InstanceType {
	r := scheduling.MustResources(corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(fmt.Sprint(cpu)),
		corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", memGi)),
		corev1.ResourcePods:   resource.MustParse("110"),
	})
	return &catalog.InstanceType{
		Name:        name,
		Labels:      map[string]string{scheduling.LabelArch: "amd64", scheduling.LabelOS: "linux", scheduling.LabelInstanceType: name},
		Capacity:    r,
		Allocatable: r,
		Offerings: catalog.Offerings{
			{Zone: zone, CapacityType: apisv1.CapacityTypeOnDemand, Price: onDemand, Available: true},
			{Zone: zone, CapacityType: apisv1.CapacityTypeSpot, Price: spot, Available: true},
		},
	}
}

// types is the test catalog: sizes doubling in cpu, memory and price.
func types() []*catalog.InstanceType {
	return []*catalog.InstanceType{
		instanceType("c.small", 2, 8, 0.10, 0.04),
		instanceType("c.medium", 4, 16, 0.20, 0.08),
		instanceType("c.large", 8, 32, 0.40, 0.16),
		instanceType("c.xlarge", 16, 64, 0.80, 0.32),
	}
}

// manySpotTypes are n spot-only types of 4 cpu, priced 0.010, 0.011, ...
// (spot→spot needs enough cheaper options).
func manySpotTypes(n int) []*catalog.InstanceType {
	var out []*catalog.InstanceType
	for i := range n {
		it := instanceType(fmt.Sprintf("s.%02d", i), 4, 16, 1, 0.010+0.001*float64(i))
		it.Offerings = it.Offerings[1:]
		out = append(out, it)
	}
	return out
}

func typeByName(all []*catalog.InstanceType, name string) *catalog.InstanceType {
	for _, it := range all {
		if it.Name == name {
			return it
		}
	}
	panic("no instance type " + name)
}

type poolOpt func(*disruption.NodePool)

// pool is a defaulted NodePool (consolidateAfter 0s, WhenEmptyOrUnderutilized,
// a 100% budget) launching the test catalog.
func pool(name string, opts ...poolOpt) disruption.NodePool {
	np := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &apisv1.NodeClassReference{Kind: "EC2NodeClass", Name: "default", Group: apisv1.Group}
	np.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "100%"}}
	np.SetDefaults()
	p := disruption.NodePool{Pool: np, Launchable: true,
		Launch:       packer.NodePool{Name: name, InstanceTypes: types(), CapacityTypes: []string{apisv1.CapacityTypeOnDemand}},
		NodePoolHash: disruption.NodePoolHash(np)}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func policy(p apisv1.ConsolidationPolicy) poolOpt {
	return func(np *disruption.NodePool) { np.Pool.Spec.Disruption.ConsolidationPolicy = p }
}
func consolidateAfter(d apisv1.DurationOrNever) poolOpt {
	return func(np *disruption.NodePool) { np.Pool.Spec.Disruption.ConsolidateAfter = d }
}
func budgets(bs ...apisv1.Budget) poolOpt {
	return func(np *disruption.NodePool) { np.Pool.Spec.Disruption.Budgets = bs }
}
func launchTypes(ts []*catalog.InstanceType) poolOpt {
	return func(np *disruption.NodePool) { np.Launch.InstanceTypes = ts }
}

// spotLaunches lets the pool launch spot (and on-demand) capacity.
func spotLaunches(np *disruption.NodePool) { np.Launch.CapacityTypes = nil }
func minNodes(n int32) poolOpt {
	return func(np *disruption.NodePool) { np.Pool.Spec.MinNodes = &n }
}
func nodeClass(nc disruption.NodeClass) poolOpt {
	return func(np *disruption.NodePool) { np.NodeClass = &nc }
}
func terminationGracePeriod(d string) poolOpt {
	return func(np *disruption.NodePool) {
		tgp := apisv1.Duration(d)
		np.Pool.Spec.Template.Spec.TerminationGracePeriod = &tgp
	}
}
func requirement(key string, op corev1.NodeSelectorOperator, values ...string) poolOpt {
	return func(np *disruption.NodePool) {
		np.Launch.Requirements = append(np.Launch.Requirements, corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values})
	}
}

func budget(nodes string, reasons ...apisv1.DisruptionReason) apisv1.Budget {
	return apisv1.Budget{Nodes: nodes, Reasons: reasons}
}

type nodeOpt func(*disruption.Node)

// node is an initialized, Ready, on-demand node of pool in zone-a, created
// and last touched by a pod an hour ago.
func node(name, poolName, typeName string, opts ...nodeOpt) disruption.Node {
	it := typeByName(append(types(), manySpotTypes(20)...), typeName)
	n := disruption.Node{
		ClaimName: name, Name: name, NodePool: poolName, InstanceType: typeName, Zone: zone,
		CapacityType: apisv1.CapacityTypeOnDemand, Price: it.Offerings[0].Price, Allocatable: it.Allocatable,
		Labels: map[string]string{
			scheduling.LabelNodePool: poolName, scheduling.LabelInstanceType: typeName, scheduling.LabelZone: zone,
			scheduling.LabelCapacityType: apisv1.CapacityTypeOnDemand, scheduling.LabelHostname: name,
			scheduling.LabelArch: "amd64", scheduling.LabelOS: "linux",
		},
		CreatedAt: now.Add(-time.Hour), Initialized: true, LastPodEventAt: now.Add(-time.Hour),
		Ready: corev1.ConditionTrue, ReadySince: now.Add(-time.Hour),
	}
	if it.Offerings[0].CapacityType == apisv1.CapacityTypeSpot {
		spot(&n)
	}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func spot(n *disruption.Node) {
	n.CapacityType = apisv1.CapacityTypeSpot
	n.Labels[scheduling.LabelCapacityType] = apisv1.CapacityTypeSpot
	for _, it := range append(types(), manySpotTypes(20)...) {
		if it.Name == n.InstanceType {
			for _, o := range it.Offerings {
				if o.CapacityType == apisv1.CapacityTypeSpot {
					n.Price = o.Price
				}
			}
		}
	}
}

// running binds pods to the node.
func running(pods ...*corev1.Pod) nodeOpt {
	return func(n *disruption.Node) {
		for _, p := range pods {
			p.Spec.NodeName = n.Name
			p.Status.Phase = corev1.PodRunning
			n.Pods = append(n.Pods, disruption.Pod{Pod: p})
		}
	}
}

// pdbBlocked binds pods whose eviction the named PDBs block.
func pdbBlocked(p *corev1.Pod, pdbs ...string) nodeOpt {
	return func(n *disruption.Node) {
		running(p)(n)
		n.Pods[len(n.Pods)-1].PDBBlocked = pdbs
	}
}

// pdbBlockedAlways binds pods whose eviction the named PDBs never allow
// (Pod.PDBAlwaysBlocks).
func pdbBlockedAlways(p *corev1.Pod, pdbs ...string) nodeOpt {
	return func(n *disruption.Node) {
		pdbBlocked(p, pdbs...)(n)
		n.Pods[len(n.Pods)-1].PDBAlwaysBlocks = true
	}
}

func annotated(k, v string) nodeOpt {
	return func(n *disruption.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[k] = v
	}
}
func uninitialized(n *disruption.Node) { n.Initialized = false }
func deleting(n *disruption.Node)      { n.Deleting = true }

// heldUncharged: a command holds the node, but its budget is accounted
// elsewhere (Node.Uncharged).
func heldUncharged(n *disruption.Node) { n.Disrupting, n.Uncharged = true, true }

// validating: a command waiting out its validation delay holds the node
// (Node.Waiting): no budget, but the pool's second ledger.
func validating(n *disruption.Node)      { n.Disrupting, n.Uncharged, n.Waiting = true, true, true }
func nominatedUntil(t time.Time) nodeOpt { return func(n *disruption.Node) { n.NominatedUntil = t } }
func replacementFor(command string) nodeOpt {
	return func(n *disruption.Node) { n.ReplacementFor = command }
}
func lastPodEvent(t time.Time) nodeOpt { return func(n *disruption.Node) { n.LastPodEventAt = t } }
func createdAt(t time.Time) nodeOpt    { return func(n *disruption.Node) { n.CreatedAt = t } }
func driftedSince(t time.Time) nodeOpt { return func(n *disruption.Node) { n.DriftedSince = t } }
func launchedByConsolidation(t time.Time) nodeOpt {
	return func(n *disruption.Node) { n.LaunchedByConsolidationAt = t }
}
func notReady(status corev1.ConditionStatus, since time.Time) nodeOpt {
	return func(n *disruption.Node) { n.Ready, n.ReadySince = status, since }
}
func stamped(poolHash, classHash string) nodeOpt {
	return func(n *disruption.Node) {
		n.NodePoolHash, n.NodePoolHashVersion = poolHash, disruption.NodePoolHashVersion
		n.NodeClassHash, n.NodeClassHashVersion = classHash, disruption.NodeClassHashVersion
	}
}
func launchedWith(image, subnet string, sgs ...string) nodeOpt {
	return func(n *disruption.Node) { n.ImageID, n.SubnetID, n.SecurityGroupIDs = image, subnet, sgs }
}
func label(k, v string) nodeOpt { return func(n *disruption.Node) { n.Labels[k] = v } }

type podOpt func(*corev1.Pod)

// pod is a ReplicaSet's pod requesting cpu and memory.
func pod(name, cpu, memory string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", APIVersion: "apps/v1"}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func pods(n int, prefix, cpu, memory string, opts ...podOpt) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("%s-%d", prefix, i), cpu, memory, opts...)
	}
	return out
}

func podAnnotated(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}
func daemonSetPod(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", APIVersion: "apps/v1"}}
}
func priority(v int32) podOpt { return func(p *corev1.Pod) { p.Spec.Priority = &v } }
func startedAt(t time.Time) podOpt {
	return func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: t} }
}

// input assembles an Input at now.
func input(pools []disruption.NodePool, nodes ...disruption.Node) disruption.Input {
	return disruption.Input{Now: now, NodePools: pools, Nodes: nodes}
}

func pools(ps ...disruption.NodePool) []disruption.NodePool { return ps }

func requests(p *corev1.Pod) scheduling.Resources {
	r, err := scheduling.EffectiveRequests(p)
	if err != nil {
		panic(err)
	}
	return r
}

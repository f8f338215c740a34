package packer

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/scheduling"
)

// maxSlots bounds zones × capacity types: a pool type's usable offerings are
// a bitmask in one uint64.
const maxSlots = 64

// maxPoolExpansion bounds how many label combinations a NodePool with
// multi-valued custom requirements is split into.
const maxPoolExpansion = 64

// hostnamePlaceholder is the hostname a node that does not exist yet is
// matched with: it satisfies Exists and NotIn, never In.
const hostnamePlaceholder = "\x00new-node"

// usage is what a NodePool has counted against its limits; expanded
// (virtual) pools of one NodePool share it.
type usage struct {
	limited    [scheduling.MaxResources]bool
	limits     scheduling.Resources
	used       scheduling.Resources
	nodesLimit int64 // -1: none
	nodes      int64
}

func (u *usage) allows(capacity scheduling.Resources) bool {
	if u.nodesLimit >= 0 && u.nodes+1 > u.nodesLimit {
		return false
	}
	for i, on := range u.limited {
		if on && u.used[i]+capacity[i] > u.limits[i] {
			return false
		}
	}
	return true
}

// exceeded names the limits launching capacity would break.
func (u *usage) exceeded(capacity scheduling.Resources) []string {
	var out []string
	for i, on := range u.limited {
		if on && u.used[i]+capacity[i] > u.limits[i] {
			out = append(out, string(scheduling.ResourceNameAt(i)))
		}
	}
	if u.nodesLimit >= 0 && u.nodes+1 > u.nodesLimit {
		out = append(out, string(scheduling.ResourceNodes))
	}
	return out
}

// pool is a NodePool, or one label combination of a NodePool whose
// requirements leave a custom label open to several values.
type pool struct {
	idx     int
	spec    *NodePool
	name    string
	weight  int32
	reqs    scheduling.Requirements
	labels  map[string]string // canonical: template labels, pinned requirements, nodepool
	taints  []corev1.Taint
	usage   *usage
	pts     []int // pool types, by instance type name
	hasLims bool
	mvs     []minValues
}

// poolType is an instance type as a pool may launch it.
type poolType struct {
	idx    int
	pool   int
	it     *catalog.InstanceType
	labels map[string]string // canonical type labels merged with the pool's
	// Per slot (zone × capacity type): the offering price (NaN when none),
	// and the allocatable left after the DaemonSets that would run there.
	price   []float64
	alloc   []scheduling.Resources
	offered uint64 // slots with an available offering the pool allows
	usable  uint64 // offered slots whose DaemonSets fit
	dsMask  []uint64
}

// podClass is a set of pending pods identical for scheduling purposes.
type podClass struct {
	idx  int
	pods []int // input indices, input order
	next int   // pods[next:] are pending
	rep  *corev1.Pod
	err  error // the pod spec cannot be interpreted

	req  scheduling.Resources
	nz   []int // dimensions req uses
	alts []scheduling.Requirements
	tol  []bool   // per pool: taints tolerated
	mask []uint64 // per pool type: slots whose node labels suit the pod (shared between classes)
	// existing[i]: existing node i's labels and taints suit the pod.
	existing []bool

	rules        []rule  // topology rules the class must obey or counts for
	matchGroups  []int32 // groups counting this class
	ownerCounted []int32 // anti-affinity and spread groups this class owns (owners are counted per domain)
	exclusive    bool    // self anti-affinity on hostname: one per node
	pinned       bool    // counts for a zone spread it cannot balance (see rule.pinned)
	hostSpread   bool    // counted by a hard hostname spread

	ports hostPorts // host ports each pod binds: one pod per node, away from pods and DaemonSets binding the same
	cur   variant   // the variant of rep in force (see preferences.go)
	// baseAlts and baseMask: rep's required node requirements alone (spread domains).
	baseAlts []scheduling.Requirements
	baseMask []uint64
	volumes  []volumeTopology // node requirements of the pods' volumes
	ladder   []variant        // the variants left, next first

	blocked string // why the class may not use some pools (minValues a pod alone cannot meet)

	value float64 // worth of one pod, in $/h (LP duals), for node choice
	bonus float64 // cheapest node that can host one pod alone (exclusive classes)
}

func (c *podClass) pending() int { return len(c.pods) - c.next }

// prepare turns the input into indexed, precomputed state.
func newPacker(in Input) (*packer, error) {
	p := &packer{in: in, zoneIdx: map[string]int{}, ctIdx: map[string]int{}}
	for _, build := range []func() error{p.buildSlots, p.buildPools, p.buildDaemonSets} {
		if err := build(); err != nil {
			return nil, &InvalidInputError{Err: err}
		}
	}
	p.buildNodes()
	p.buildClasses()
	p.buildTopology()
	p.buildCandidates()
	return p, nil
}

// buildSlots indexes zones and capacity types over all offerings.
func (p *packer) buildSlots() error {
	zones := map[string]bool{}
	cts := map[string]bool{scheduling.CapacityTypeSpot: true, scheduling.CapacityTypeOnDemand: true}
	for _, np := range p.in.NodePools {
		for _, it := range np.InstanceTypes {
			for _, o := range it.Offerings {
				zones[o.Zone] = true
				cts[o.CapacityType] = true
			}
		}
	}
	p.zones = sortedKeys(zones)
	// spot and on-demand first, then any others by name.
	p.cts = []string{scheduling.CapacityTypeSpot, scheduling.CapacityTypeOnDemand}
	for _, ct := range sortedKeys(cts) {
		if ct != scheduling.CapacityTypeSpot && ct != scheduling.CapacityTypeOnDemand {
			p.cts = append(p.cts, ct)
		}
	}
	for i, z := range p.zones {
		p.zoneIdx[z] = i
	}
	for i, ct := range p.cts {
		p.ctIdx[ct] = i
	}
	p.nSlots = len(p.zones) * len(p.cts)
	if p.nSlots > maxSlots {
		return fmt.Errorf("%d zones × %d capacity types exceed the packer's %d offering slots", len(p.zones), len(p.cts), maxSlots)
	}
	return nil
}

func (p *packer) slotOf(zone, ct string) int { return p.zoneIdx[zone]*len(p.cts) + p.ctIdx[ct] }
func (p *packer) slotZone(s int) string      { return p.zones[s/len(p.cts)] }
func (p *packer) slotCT(s int) string        { return p.cts[s%len(p.cts)] }

// launchKeys are labels whose value comes from the instance type or the
// offering rather than from the NodePool.
var launchKeys = map[string]bool{
	scheduling.LabelZone: true, scheduling.LabelCapacityType: true, scheduling.LabelHostname: true,
	scheduling.LabelRegion: true,
}

func (p *packer) buildPools() error {
	typeLabels := map[*catalog.InstanceType]map[string]string{}
	for i := range p.in.NodePools {
		np := &p.in.NodePools[i]
		if np.Name == "" {
			return fmt.Errorf("nodePools[%d]: name is empty", i)
		}
		reqs, err := scheduling.RequirementsFromNodeSelector(np.Requirements)
		if err != nil {
			return fmt.Errorf("nodePools[%d] (%s): %w", i, np.Name, err)
		}
		if len(np.CapacityTypes) > 0 {
			r, err := scheduling.NewRequirement(scheduling.LabelCapacityType, corev1.NodeSelectorOpIn, np.CapacityTypes...)
			if err != nil {
				return fmt.Errorf("nodePools[%d] (%s): capacityTypes: %w", i, np.Name, err)
			}
			reqs.Add(r)
		}
		mvs, err := poolMinValues(np)
		if err != nil {
			return fmt.Errorf("nodePools[%d] (%s): %w", i, np.Name, err)
		}
		u := &usage{nodesLimit: -1}
		for _, name := range sortedResourceNames(np.Limits) {
			q := np.Limits[name]
			if name == scheduling.ResourceNodes {
				u.nodesLimit = q.Value()
				continue
			}
			idx, err := scheduling.ResourceIndex(name)
			if err != nil {
				return fmt.Errorf("nodePools[%d] (%s): limits: %w", i, np.Name, err)
			}
			u.limited[idx] = true
			u.limits[idx] = quantityValue(idx, q)
		}
		for _, name := range sortedResourceNames(np.Used) {
			q := np.Used[name]
			if name == scheduling.ResourceNodes {
				u.nodes = q.Value()
				continue
			}
			idx, err := scheduling.ResourceIndex(name)
			if err != nil {
				return fmt.Errorf("nodePools[%d] (%s): used: %w", i, np.Name, err)
			}
			u.used[idx] = quantityValue(idx, q)
		}

		labels := scheduling.CanonicalLabels(np.Labels)
		labels[scheduling.LabelNodePool] = np.Name
		// Keys the pool's instance types define.
		defined := map[string]bool{}
		for _, it := range np.InstanceTypes {
			tl, ok := typeLabels[it]
			if !ok {
				tl = scheduling.CanonicalLabels(it.Labels)
				tl[scheduling.LabelInstanceType] = it.Name
				typeLabels[it] = tl
			}
			for k := range tl {
				defined[k] = true
			}
		}
		// Custom keys the requirements pin become labels; keys left open to
		// several values split the pool, one label combination each.
		combos := []map[string]string{{}}
		for _, r := range reqs.Items() {
			k := r.Key()
			if launchKeys[k] || defined[k] || scheduling.IsInstanceTypeLabel(k) {
				continue
			}
			if _, set := labels[k]; set {
				continue
			}
			if v, ok := r.SingleValue(); ok {
				labels[k] = v
				continue
			}
			if !r.IsFinite() || r.AllowsAbsent() {
				continue // NotIn/DoesNotExist: no label; Exists/Gt/Lt: cannot name a value
			}
			var next []map[string]string
			for _, combo := range combos {
				for _, v := range r.Values() {
					c := map[string]string{k: v}
					for ck, cv := range combo {
						c[ck] = cv
					}
					next = append(next, c)
				}
			}
			if len(next) > maxPoolExpansion {
				return fmt.Errorf("nodePools[%d] (%s): requirements leave more than %d combinations of custom labels open", i, np.Name, maxPoolExpansion)
			}
			combos = next
		}
		for _, combo := range combos {
			pl := &pool{idx: len(p.pools), spec: np, name: np.Name, weight: np.Weight, reqs: reqs,
				taints: np.Taints, usage: u, hasLims: u.nodesLimit >= 0 || u.limited != [scheduling.MaxResources]bool{}, mvs: mvs}
			pl.labels = map[string]string{}
			for k, v := range labels {
				pl.labels[k] = v
			}
			for k, v := range combo {
				pl.labels[k] = v
			}
			p.pools = append(p.pools, pl)
			p.buildPoolTypes(pl, typeLabels)
		}
	}
	return nil
}

func (p *packer) buildPoolTypes(pl *pool, typeLabels map[*catalog.InstanceType]map[string]string) {
	zoneReq, hasZone := pl.reqs.Get(scheduling.LabelZone)
	ctReq, hasCT := pl.reqs.Get(scheduling.LabelCapacityType)
	its := append([]*catalog.InstanceType(nil), pl.spec.InstanceTypes...)
	sort.SliceStable(its, func(i, j int) bool { return its[i].Name < its[j].Name })
	for _, it := range its {
		merged := make(map[string]string, len(typeLabels[it])+len(pl.labels))
		for k, v := range pl.labels {
			merged[k] = v
		}
		for k, v := range typeLabels[it] {
			merged[k] = v
		}
		if !matchesExceptOffering(pl.reqs, merged, true) {
			continue
		}
		pt := &poolType{idx: len(p.pts), pool: pl.idx, it: it, labels: merged,
			price: make([]float64, p.nSlots), alloc: make([]scheduling.Resources, p.nSlots)}
		for s := range pt.price {
			pt.price[s] = math.NaN()
		}
		for _, o := range it.Offerings {
			if !o.Available || (hasZone && !zoneReq.Has(o.Zone)) || (hasCT && !ctReq.Has(o.CapacityType)) {
				continue
			}
			s := p.slotOf(o.Zone, o.CapacityType)
			if math.IsNaN(pt.price[s]) || o.Price < pt.price[s] {
				pt.price[s] = o.Price
			}
			pt.offered |= 1 << s
		}
		if pt.offered == 0 {
			continue
		}
		p.pts = append(p.pts, pt)
		pl.pts = append(pl.pts, pt.idx)
	}
}

// matchesExceptOffering reports whether labels meet reqs on every key but
// zone and capacity type (decided per offering). A node that does not exist
// yet has a hostname that meets Exists/NotIn but no In. With skipOpen,
// custom keys the labels do not define are not held against them (a pool's
// own open requirements); instance-type keys (scheduling.IsInstanceTypeLabel)
// always are: a type without instance-local-nvme fails "Gt 300", as in
// Karpenter, where every type defines its well-known labels.
func matchesExceptOffering(reqs scheduling.Requirements, labels map[string]string, skipOpen bool) bool {
	for _, r := range reqs.Items() {
		switch r.Key() {
		case scheduling.LabelZone, scheduling.LabelCapacityType:
			continue
		case scheduling.LabelHostname:
			if !r.Matches(hostnamePlaceholder, true) {
				return false
			}
			continue
		}
		v, ok := labels[r.Key()]
		if !ok && skipOpen && !scheduling.IsInstanceTypeLabel(r.Key()) {
			continue
		}
		if !r.Matches(v, ok) {
			return false
		}
	}
	return true
}

// slotMask returns the slots of pt whose zone and capacity type meet alt
// (alt's other keys already checked).
func (p *packer) slotMask(pt *poolType, alt scheduling.Requirements, within uint64) uint64 {
	zoneReq, hasZone := alt.Get(scheduling.LabelZone)
	ctReq, hasCT := alt.Get(scheduling.LabelCapacityType)
	if !hasZone && !hasCT {
		return within
	}
	var m uint64
	for s := 0; s < p.nSlots; s++ {
		if within&(1<<s) == 0 {
			continue
		}
		if hasZone && !zoneReq.Has(p.slotZone(s)) {
			continue
		}
		if hasCT && !ctReq.Has(p.slotCT(s)) {
			continue
		}
		m |= 1 << s
	}
	return m
}

// compatMasks computes, per pool type, the offered slots where a node
// meets any of the alternatives.
func (p *packer) compatMasks(alts []scheduling.Requirements, within func(*poolType) uint64) []uint64 {
	masks := make([]uint64, len(p.pts))
	for i, pt := range p.pts {
		var m uint64
		for _, alt := range alts {
			if matchesExceptOffering(alt, pt.labels, false) {
				m |= p.slotMask(pt, alt, within(pt))
			}
		}
		masks[i] = m
	}
	return masks
}

type daemonSet struct {
	pod   *corev1.Pod
	req   scheduling.Resources
	ports hostPorts
	mask  []uint64 // per pool type: slots it runs on
}

// buildDaemonSets works out which DaemonSet pods run on each pool type and
// slot, and the allocatable they leave.
func (p *packer) buildDaemonSets() error {
	for i, pod := range p.in.DaemonSetPods {
		req, err := scheduling.EffectiveRequests(pod)
		if err != nil {
			return fmt.Errorf("daemonSetPods[%d] (%s): %w", i, pod.Name, err)
		}
		alts, err := scheduling.PodRequirements(pod)
		if err != nil {
			return fmt.Errorf("daemonSetPods[%d] (%s): %w", i, pod.Name, err)
		}
		ds := &daemonSet{pod: pod, req: req, ports: podHostPorts(pod)}
		ds.mask = p.compatMasks(alts, func(pt *poolType) uint64 { return pt.offered })
		for ptIdx, pt := range p.pts {
			if scheduling.Tolerates(pod.Spec.Tolerations, p.pools[pt.pool].taints) != nil {
				ds.mask[ptIdx] = 0
			}
		}
		p.daemonSets = append(p.daemonSets, ds)
	}
	for _, pt := range p.pts {
		for s := 0; s < p.nSlots; s++ {
			if pt.offered&(1<<s) == 0 {
				continue
			}
			a := pt.it.Allocatable
			for _, ds := range p.daemonSets {
				if ds.mask[pt.idx]&(1<<s) != 0 {
					a = a.Sub(ds.req)
				}
			}
			pt.alloc[s] = a
			if !a.HasNegative() {
				pt.usable |= 1 << s
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedResourceNames(list corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(list))
	for k := range list {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func quantityValue(idx int, q resource.Quantity) int64 {
	if idx == scheduling.IndexCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// podKey names a pod for messages.
func podKey(pod *corev1.Pod) string {
	if pod.Namespace == "" {
		return "default/" + pod.Name
	}
	return pod.Namespace + "/" + pod.Name
}

// hostPortsOnly keeps the ports that bind a host port (nil when none).
func hostPortsOnly(ports []corev1.ContainerPort) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, p := range ports {
		if p.HostPort > 0 {
			out = append(out, corev1.ContainerPort{HostPort: p.HostPort, HostIP: p.HostIP, Protocol: p.Protocol})
		}
	}
	return out
}

// classKey is the identity of a pod for scheduling: namespace, labels and
// the spec fields the packer reads, serialised with the API's deterministic
// protobuf encoding (map keys sorted).
func classKey(pod *corev1.Pod, buf *strings.Builder) string {
	spec := corev1.PodSpec{
		NodeSelector:              pod.Spec.NodeSelector,
		Affinity:                  pod.Spec.Affinity,
		Tolerations:               pod.Spec.Tolerations,
		TopologySpreadConstraints: pod.Spec.TopologySpreadConstraints,
		Overhead:                  pod.Spec.Overhead,
		Resources:                 pod.Spec.Resources,
		Containers:                make([]corev1.Container, len(pod.Spec.Containers)),
		InitContainers:            make([]corev1.Container, len(pod.Spec.InitContainers)),
	}
	for i, c := range pod.Spec.Containers {
		spec.Containers[i] = corev1.Container{Resources: c.Resources, Ports: hostPortsOnly(c.Ports)}
	}
	for i, c := range pod.Spec.InitContainers {
		spec.InitContainers[i] = corev1.Container{Resources: c.Resources, RestartPolicy: c.RestartPolicy, Ports: hostPortsOnly(c.Ports)}
	}
	meta := metav1.ObjectMeta{Namespace: pod.Namespace, Labels: pod.Labels}
	buf.Reset()
	if b, err := meta.Marshal(); err == nil {
		buf.Write(b)
	}
	buf.WriteByte(0)
	if b, err := spec.Marshal(); err == nil {
		buf.Write(b)
	}
	return buf.String()
}

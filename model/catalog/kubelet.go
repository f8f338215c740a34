package catalog

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/millwright/millwright/model/scheduling"
)

// KubeletSettings are the kubelet settings that change what a node offers
// pods (an EC2NodeClass's spec.kubelet); nil fields keep the defaults.
type KubeletSettings struct {
	MaxPods     *int32
	PodsPerCore *int32
	// KubeReserved and SystemReserved: cpu, memory, ephemeral-storage
	// quantities (pid is accepted and ignored).
	KubeReserved   map[string]string
	SystemReserved map[string]string
	// EvictionHard and EvictionSoft: memory.available and nodefs.available
	// thresholds, quantities or percentages of capacity.
	EvictionHard map[string]string
	EvictionSoft map[string]string
}

// Eviction signals that hold back node resources.
const (
	SignalMemoryAvailable = "memory.available"
	SignalNodeFSAvailable = "nodefs.available"
)

// Pods is the node's pod limit: maxPods if set, else the ENI-limited
// figure; podsPerCore caps it at that many per vCPU.
func (s InstanceTypeSpec) Pods(k *KubeletSettings) int64 {
	pods := int64(s.MaxPods)
	if k != nil && k.MaxPods != nil {
		pods = int64(*k.MaxPods)
	}
	if k != nil && k.PodsPerCore != nil && *k.PodsPerCore > 0 {
		pods = min(pods, int64(*k.PodsPerCore)*int64(s.VCPU))
	}
	return pods
}

// WithKubelet returns the type's capacity and allocatable under kubelet
// settings, as Karpenter computes them (karpenter-provider-aws
// pkg/providers/instancetype/types.go): pods from maxPods and podsPerCore;
// kubeReserved defaults (cpu by range, 11Mi per pod + 255Mi, 1Gi storage)
// overridden key by key; systemReserved added; eviction thresholds the
// larger of evictionHard and evictionSoft per signal, over the defaults
// (100Mi memory, 10% storage). Soft thresholds count because pods are
// evicted past them too; the kubelet's own allocatable (KubeletAllocatable)
// leaves them out. A nil k gives Capacity and Allocatable.
func (s InstanceTypeSpec) WithKubelet(k *KubeletSettings) (capacity, allocatable scheduling.Resources, err error) {
	return s.resources(k, true)
}

// KubeletAllocatable is what a kubelet with settings k reports: capacity
// minus kube and system reserved and the hard eviction thresholds (nodeadm
// fills kubeReserved's defaults as Karpenter does).
func (s InstanceTypeSpec) KubeletAllocatable(k *KubeletSettings) (capacity, allocatable scheduling.Resources, err error) {
	return s.resources(k, false)
}

func (s InstanceTypeSpec) resources(k *KubeletSettings, withSoft bool) (capacity, allocatable scheduling.Resources, err error) {
	t := s
	t.MaxPods = int(s.Pods(k))
	capacity = t.Capacity()
	o := t.Overhead()
	if k == nil {
		return capacity, capacity.Sub(o.Total()), nil
	}
	if err := override(&o.KubeReserved, k.KubeReserved, "kubeReserved"); err != nil {
		return capacity, capacity, err
	}
	if err := override(&o.SystemReserved, k.SystemReserved, "systemReserved"); err != nil {
		return capacity, capacity, err
	}
	memory := capacity[scheduling.IndexMemory] - o.VMMemory[scheduling.IndexMemory]
	storage := capacity[scheduling.IndexEphemeralStorage]
	signals := []map[string]string{k.EvictionHard}
	if withSoft {
		signals = append(signals, k.EvictionSoft)
	}
	var over scheduling.Resources
	var set [scheduling.MaxResources]bool
	for i, m := range signals {
		field := "evictionHard"
		if i == 1 {
			field = "evictionSoft"
		}
		for _, sig := range []struct {
			name  string
			index int
			of    int64
		}{{SignalMemoryAvailable, scheduling.IndexMemory, memory}, {SignalNodeFSAvailable, scheduling.IndexEphemeralStorage, storage}} {
			v, ok := m[sig.name]
			if !ok {
				continue
			}
			q, err := threshold(v, sig.of)
			if err != nil {
				return capacity, capacity, fmt.Errorf("%s[%s]: %w", field, sig.name, err)
			}
			over[sig.index] = max(over[sig.index], q)
			set[sig.index] = true
		}
	}
	for i, on := range set {
		if on {
			o.EvictionThreshold[i] = over[i]
		}
	}
	return capacity, capacity.Sub(o.Total()), nil
}

// override replaces reserved resources key by key.
func override(r *scheduling.Resources, values map[string]string, field string) error {
	keys := make([]string, 0, len(values))
	for key := range values {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		var idx int
		switch key {
		case "cpu":
			idx = scheduling.IndexCPU
		case "memory":
			idx = scheduling.IndexMemory
		case "ephemeral-storage":
			idx = scheduling.IndexEphemeralStorage
		case "pid":
			continue
		default:
			return fmt.Errorf("%s[%s]: not one of cpu, memory, ephemeral-storage, pid", field, key)
		}
		q, err := resource.ParseQuantity(values[key])
		if err != nil || q.Sign() < 0 {
			return fmt.Errorf("%s[%s]: %q is not a non-negative quantity", field, key, values[key])
		}
		if idx == scheduling.IndexCPU {
			r[idx] = q.MilliValue()
		} else {
			r[idx] = q.Value()
		}
	}
	return nil
}

// threshold is an eviction threshold in bytes: a quantity, or a percentage
// of of (rounded up).
func threshold(v string, of int64) (int64, error) {
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil || f < 0 || f > 100 {
			return 0, fmt.Errorf("%q is not a percentage", v)
		}
		return int64(math.Ceil(float64(of) * f / 100)), nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("%q is not a non-negative quantity or percentage", v)
	}
	return q.Value(), nil
}

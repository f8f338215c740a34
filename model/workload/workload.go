// Package workload owns the workload file format of
// ../shared/benchmarks/WORKLOAD.md (an offline provisioning problem:
// instance types with offerings, NodePools, DaemonSet pods and pending
// pods) and the plan answer format, and converts between them and the
// packer's Input and Result. It does no planning itself.
package workload

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// File is one workload file.
type File struct {
	Name          string         `json:"name"`
	InstanceTypes []InstanceType `json:"instanceTypes"`
	NodePools     []NodePool     `json:"nodePools"`
	DaemonSetPods []corev1.Pod   `json:"daemonSetPods,omitempty"`
	Pods          []corev1.Pod   `json:"pods"`
	// Nodes is a Millwright extension: existing and in-flight nodes the
	// plan may place pods on before launching new ones.
	Nodes []Node `json:"nodes,omitempty"`
	// Namespaces (extension) give namespace labels for pod affinity's
	// namespaceSelector; a namespace not listed has no labels.
	Namespaces []corev1.Namespace `json:"namespaces,omitempty"`
	// PersistentVolumeClaims, PersistentVolumes and StorageClasses
	// (extension) give the pods' volumes' topology.
	PersistentVolumeClaims []corev1.PersistentVolumeClaim `json:"persistentVolumeClaims,omitempty"`
	PersistentVolumes      []corev1.PersistentVolume      `json:"persistentVolumes,omitempty"`
	StorageClasses         []storagev1.StorageClass       `json:"storageClasses,omitempty"`
}

// InstanceType is a launchable type with its offerings.
type InstanceType struct {
	Name        string              `json:"name"`
	Arch        string              `json:"arch"`
	OS          string              `json:"os"`
	Labels      map[string]string   `json:"labels,omitempty"`
	Capacity    corev1.ResourceList `json:"capacity"`
	Allocatable corev1.ResourceList `json:"allocatable"`
	Offerings   []catalog.Offering  `json:"offerings"`
}

// NodePool constrains launches.
type NodePool struct {
	Name          string                           `json:"name"`
	Weight        int32                            `json:"weight,omitempty"`
	Requirements  []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
	CapacityTypes []string                         `json:"capacityTypes,omitempty"`
	Labels        map[string]string                `json:"labels,omitempty"`
	Taints        []corev1.Taint                   `json:"taints,omitempty"`
	StartupTaints []corev1.Taint                   `json:"startupTaints,omitempty"`
	Limits        corev1.ResourceList              `json:"limits,omitempty"`
	// MinValues (extension), per requirement key, is the least number of
	// distinct values of the key each node's launch options must span.
	MinValues map[string]int `json:"minValues,omitempty"`
	// Used is what existing nodes already count against Limits (extension).
	Used corev1.ResourceList `json:"used,omitempty"`
}

// Node is an existing or in-flight node (extension).
type Node struct {
	Name      string              `json:"name"`
	NodePool  string              `json:"nodePool,omitempty"`
	InFlight  bool                `json:"inFlight,omitempty"`
	Labels    map[string]string   `json:"labels,omitempty"`
	Taints    []corev1.Taint      `json:"taints,omitempty"`
	Available corev1.ResourceList `json:"available"`
	Pods      []corev1.Pod        `json:"pods,omitempty"`
}

// Read parses a workload file; errors name the file.
func Read(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// Decode parses a workload from r.
func Decode(r io.Reader) (*File, error) {
	var w File
	dec := json.NewDecoder(r)
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("parsing workload: %w", err)
	}
	return &w, nil
}

// PackerInput converts the workload for the packer; errors name the field.
func (w *File) PackerInput() (packer.Input, error) {
	var in packer.Input
	types := make([]*catalog.InstanceType, 0, len(w.InstanceTypes))
	seen := map[string]bool{}
	for i, t := range w.InstanceTypes {
		field := fmt.Sprintf("instanceTypes[%d] (%s)", i, t.Name)
		if t.Name == "" {
			return in, fmt.Errorf("instanceTypes[%d].name: empty", i)
		}
		if seen[t.Name] {
			return in, fmt.Errorf("%s.name: duplicate", field)
		}
		seen[t.Name] = true
		capacity, err := scheduling.ResourcesFromList(t.Capacity)
		if err != nil {
			return in, fmt.Errorf("%s.capacity: %w", field, err)
		}
		allocatable, err := scheduling.ResourcesFromList(t.Allocatable)
		if err != nil {
			return in, fmt.Errorf("%s.allocatable: %w", field, err)
		}
		if allocatable.CPU() <= 0 || allocatable.Memory() <= 0 || allocatable.Pods() <= 0 {
			return in, fmt.Errorf("%s.allocatable: cpu, memory and pods must be positive, got %s", field, allocatable)
		}
		labels := scheduling.CanonicalLabels(t.Labels)
		labels[scheduling.LabelInstanceType] = t.Name
		if t.Arch != "" {
			labels[scheduling.LabelArch] = t.Arch
		}
		os := t.OS
		if os == "" {
			os = "linux"
		}
		labels[scheduling.LabelOS] = os
		for j, o := range t.Offerings {
			if o.Zone == "" || o.CapacityType == "" {
				return in, fmt.Errorf("%s.offerings[%d]: zone and capacityType are required", field, j)
			}
			if o.Price < 0 {
				return in, fmt.Errorf("%s.offerings[%d].price: negative (%v)", field, j, o.Price)
			}
		}
		types = append(types, &catalog.InstanceType{Name: t.Name, Labels: labels, Capacity: capacity,
			Allocatable: allocatable, Offerings: append(catalog.Offerings(nil), t.Offerings...)})
	}
	for _, np := range w.NodePools {
		in.NodePools = append(in.NodePools, packer.NodePool{
			Name: np.Name, Weight: np.Weight, Requirements: np.Requirements, Labels: np.Labels,
			Taints: np.Taints, StartupTaints: np.StartupTaints, CapacityTypes: np.CapacityTypes,
			Limits: np.Limits, MinValues: np.MinValues, Used: np.Used, InstanceTypes: types,
		})
	}
	if len(w.Namespaces) > 0 {
		in.Namespaces = map[string]map[string]string{}
		for _, ns := range w.Namespaces {
			in.Namespaces[ns.Name] = ns.Labels
		}
	}
	for i := range w.PersistentVolumeClaims {
		in.Storage.PersistentVolumeClaims = append(in.Storage.PersistentVolumeClaims, &w.PersistentVolumeClaims[i])
	}
	for i := range w.PersistentVolumes {
		in.Storage.PersistentVolumes = append(in.Storage.PersistentVolumes, &w.PersistentVolumes[i])
	}
	for i := range w.StorageClasses {
		in.Storage.StorageClasses = append(in.Storage.StorageClasses, &w.StorageClasses[i])
	}
	for i := range w.DaemonSetPods {
		in.DaemonSetPods = append(in.DaemonSetPods, &w.DaemonSetPods[i])
	}
	for i := range w.Pods {
		if w.Pods[i].Name == "" {
			return in, fmt.Errorf("pods[%d].metadata.name: empty", i)
		}
		in.Pods = append(in.Pods, &w.Pods[i])
	}
	for i, n := range w.Nodes {
		avail, err := scheduling.ResourcesFromList(n.Available)
		if err != nil {
			return in, fmt.Errorf("nodes[%d] (%s).available: %w", i, n.Name, err)
		}
		node := packer.Node{Name: n.Name, NodePool: n.NodePool, InFlight: n.InFlight, Labels: n.Labels, Taints: n.Taints, Available: avail}
		for j := range n.Pods {
			node.Pods = append(node.Pods, &w.Nodes[i].Pods[j])
		}
		in.Nodes = append(in.Nodes, node)
	}
	return in, nil
}

// Answer is the plan answer of WORKLOAD.md.
type Answer struct {
	Nodes         []AnswerNode          `json:"nodes"`
	Placements    []AnswerPlacement     `json:"placements,omitempty"`
	Unschedulable []AnswerUnschedulable `json:"unschedulable"`
	TotalPrice    float64               `json:"totalPrice"`
	Seconds       float64               `json:"seconds"`
}

// AnswerNode is one node to launch.
type AnswerNode struct {
	NodePool     string   `json:"nodePool"`
	InstanceType string   `json:"instanceType"`
	Zone         string   `json:"zone"`
	CapacityType string   `json:"capacityType"`
	Price        float64  `json:"price"`
	Pods         []string `json:"pods"`
}

// AnswerPlacement puts a pod on an existing node (extension).
type AnswerPlacement struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
}

// AnswerUnschedulable is a pod left pending, with the reason.
type AnswerUnschedulable struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// PodName is namespace/name as the answer spells it.
func PodName(pod *corev1.Pod) string {
	ns := pod.Namespace
	if ns == "" {
		ns = "default"
	}
	return ns + "/" + pod.Name
}

// NewAnswer renders a packer result; seconds is the planning wall time.
func NewAnswer(r packer.Result, seconds float64) Answer {
	a := Answer{Nodes: []AnswerNode{}, Unschedulable: []AnswerUnschedulable{}, Seconds: seconds}
	for _, n := range r.NewNodes {
		an := AnswerNode{NodePool: n.NodePool, InstanceType: n.InstanceType, Zone: n.Zone,
			CapacityType: n.CapacityType, Price: n.Price, Pods: make([]string, len(n.Pods))}
		for i, pod := range n.Pods {
			an.Pods[i] = PodName(pod)
		}
		a.Nodes = append(a.Nodes, an)
	}
	a.TotalPrice = r.TotalPrice()
	for _, pl := range r.Placements {
		a.Placements = append(a.Placements, AnswerPlacement{Pod: PodName(pl.Pod), Node: pl.Node})
	}
	for _, u := range r.Unschedulable {
		a.Unschedulable = append(a.Unschedulable, AnswerUnschedulable{Pod: PodName(u.Pod), Reason: u.Reason})
	}
	return a
}

// Write writes the answer as indented JSON.
func (a Answer) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(a)
}

// Scaled returns a copy of the workload with every pod repeated times
// times (copies named <name>-x<i>), for benchmarks at larger scale with the
// same mix of constraints.
func (w *File) Scaled(times int) *File {
	out := *w
	out.Name = fmt.Sprintf("%s-x%d", w.Name, times)
	out.Pods = make([]corev1.Pod, 0, len(w.Pods)*times)
	for i := 0; i < times; i++ {
		for _, p := range w.Pods {
			q := *p.DeepCopy()
			if times > 1 {
				q.Name = fmt.Sprintf("%s-x%d", p.Name, i)
			}
			out.Pods = append(out.Pods, q)
		}
	}
	return &out
}

// Truncated returns a copy with only the first n pods.
func (w *File) Truncated(n int) *File {
	out := *w
	if n < len(w.Pods) {
		out.Pods = w.Pods[:n]
		out.Name = fmt.Sprintf("%s-first%d", w.Name, n)
	}
	return &out
}

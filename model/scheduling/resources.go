package scheduling

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxResources is how many distinct resource names a Resources vector can
// hold: the four core ones, the accelerators EC2 types advertise, and room
// for a few more extended resources registered on first sight.
const MaxResources = 16

// Positions of the core and well-known resources in a Resources vector.
const (
	IndexCPU              = 0 // millicores
	IndexMemory           = 1 // bytes
	IndexPods             = 2 // count
	IndexEphemeralStorage = 3 // bytes
)

// Extended resources EC2 accelerators advertise.
const (
	ResourceNvidiaGPU   corev1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU      corev1.ResourceName = "amd.com/gpu"
	ResourceAWSNeuron   corev1.ResourceName = "aws.amazon.com/neuron"
	ResourceHabanaGaudi corev1.ResourceName = "habana.ai/gaudi"
	ResourceNodes       corev1.ResourceName = "nodes" // a NodePool limit key, never a node resource
)

// Resources is a fixed-size vector of resource amounts, indexed by the
// process-wide resource registry: cpu in millicores, memory and
// ephemeral-storage in bytes, pods and extended resources as counts. It is a
// plain array so that packing loops copy and compare it without maps or
// resource.Quantity arithmetic.
type Resources [MaxResources]int64

// ErrTooManyResources is wrapped when more than MaxResources distinct
// resource names are seen in one process.
var ErrTooManyResources = fmt.Errorf("too many distinct resource names (max %d)", MaxResources)

var registry = struct {
	sync.RWMutex
	index map[corev1.ResourceName]int
	names []corev1.ResourceName
}{}

func init() {
	registry.index = map[corev1.ResourceName]int{}
	for _, n := range []corev1.ResourceName{
		corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage,
		ResourceNvidiaGPU, ResourceAMDGPU, ResourceAWSNeuron, ResourceHabanaGaudi,
	} {
		registry.index[n] = len(registry.names)
		registry.names = append(registry.names, n)
	}
}

// ResourceIndex returns the vector position of name, registering a new
// extended resource on first sight.
func ResourceIndex(name corev1.ResourceName) (int, error) {
	registry.RLock()
	i, ok := registry.index[name]
	registry.RUnlock()
	if ok {
		return i, nil
	}
	registry.Lock()
	defer registry.Unlock()
	if i, ok := registry.index[name]; ok {
		return i, nil
	}
	if len(registry.names) == MaxResources {
		return 0, fmt.Errorf("resource %q: %w", name, ErrTooManyResources)
	}
	i = len(registry.names)
	registry.index[name] = i
	registry.names = append(registry.names, name)
	return i, nil
}

// LookupResourceIndex returns the vector position of name if it is registered.
func LookupResourceIndex(name corev1.ResourceName) (int, bool) {
	registry.RLock()
	defer registry.RUnlock()
	i, ok := registry.index[name]
	return i, ok
}

// ResourceNameAt returns the resource name at vector position i ("" if unused).
func ResourceNameAt(i int) corev1.ResourceName {
	registry.RLock()
	defer registry.RUnlock()
	if i < 0 || i >= len(registry.names) {
		return ""
	}
	return registry.names[i]
}

// ResourcesFromList converts a Kubernetes ResourceList. Fractional amounts
// of resources other than cpu round up, as the scheduler does.
func ResourcesFromList(list corev1.ResourceList) (Resources, error) {
	var r Resources
	// Iterate in name order so registration order (and thus errors) are deterministic.
	names := make([]string, 0, len(list))
	for n := range list {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		name := corev1.ResourceName(n)
		q := list[name]
		i, err := ResourceIndex(name)
		if err != nil {
			return Resources{}, err
		}
		if i == IndexCPU {
			r[i] = q.MilliValue()
		} else {
			r[i] = q.Value()
		}
	}
	return r, nil
}

// MustResources is ResourcesFromList for literals, e.g.
// MustResources(corev1.ResourceList{"cpu": resource.MustParse("2")}).
func MustResources(list corev1.ResourceList) Resources {
	r, err := ResourcesFromList(list)
	if err != nil {
		panic(err)
	}
	return r
}

// ParseResources parses name=quantity pairs, e.g. ParseResources("cpu", "2", "memory", "4Gi").
func ParseResources(pairs ...string) (Resources, error) {
	if len(pairs)%2 != 0 {
		return Resources{}, fmt.Errorf("ParseResources: odd number of arguments")
	}
	list := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		q, err := resource.ParseQuantity(pairs[i+1])
		if err != nil {
			return Resources{}, fmt.Errorf("resource %q: %w", pairs[i], err)
		}
		list[corev1.ResourceName(pairs[i])] = q
	}
	return ResourcesFromList(list)
}

// CPU returns millicores.
func (r Resources) CPU() int64 { return r[IndexCPU] }

// Memory returns bytes.
func (r Resources) Memory() int64 { return r[IndexMemory] }

// Pods returns the pod count.
func (r Resources) Pods() int64 { return r[IndexPods] }

// Get returns the amount of a named resource (0 if never registered).
func (r Resources) Get(name corev1.ResourceName) int64 {
	i, ok := LookupResourceIndex(name)
	if !ok {
		return 0
	}
	return r[i]
}

// Set returns r with the named resource set to v.
func (r Resources) Set(name corev1.ResourceName, v int64) (Resources, error) {
	i, err := ResourceIndex(name)
	if err != nil {
		return r, err
	}
	r[i] = v
	return r, nil
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	for i := range r {
		r[i] += o[i]
	}
	return r
}

// Sub returns r - o (components may go negative).
func (r Resources) Sub(o Resources) Resources {
	for i := range r {
		r[i] -= o[i]
	}
	return r
}

// Scale returns r * n.
func (r Resources) Scale(n int64) Resources {
	for i := range r {
		r[i] *= n
	}
	return r
}

// Max returns the component-wise maximum.
func (r Resources) Max(o Resources) Resources {
	for i := range r {
		if o[i] > r[i] {
			r[i] = o[i]
		}
	}
	return r
}

// Fits reports whether r fits within available in every dimension.
func (r Resources) Fits(available Resources) bool {
	for i := range r {
		if r[i] > available[i] {
			return false
		}
	}
	return true
}

// Exceeding returns the names of the dimensions where r is above available.
func (r Resources) Exceeding(available Resources) []corev1.ResourceName {
	var out []corev1.ResourceName
	for i := range r {
		if r[i] > available[i] {
			out = append(out, ResourceNameAt(i))
		}
	}
	return out
}

// IsZero reports whether every component is zero.
func (r Resources) IsZero() bool { return r == Resources{} }

// HasNegative reports whether any component is below zero.
func (r Resources) HasNegative() bool {
	for _, v := range r {
		if v < 0 {
			return true
		}
	}
	return false
}

// ResourceList converts r back to Kubernetes quantities (non-zero entries only).
func (r Resources) ResourceList() corev1.ResourceList {
	out := corev1.ResourceList{}
	for i, v := range r {
		if v == 0 {
			continue
		}
		out[ResourceNameAt(i)] = quantity(i, v)
	}
	return out
}

// String renders the non-zero components, e.g. `cpu=1930m memory=3114Mi pods=29`.
func (r Resources) String() string {
	var parts []string
	for i, v := range r {
		if v == 0 {
			continue
		}
		q := quantity(i, v)
		parts = append(parts, fmt.Sprintf("%s=%s", ResourceNameAt(i), q.String()))
	}
	if len(parts) == 0 {
		return "{}"
	}
	return strings.Join(parts, " ")
}

func quantity(i int, v int64) resource.Quantity {
	switch i {
	case IndexCPU:
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	case IndexMemory, IndexEphemeralStorage:
		return *resource.NewQuantity(v, resource.BinarySI)
	default:
		return *resource.NewQuantity(v, resource.DecimalSI)
	}
}

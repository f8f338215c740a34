// Package catalog owns Millwright's embedded EC2 instance-type catalog for
// us-east-1: the raw shapes (vCPU, memory, architecture, accelerators, ENI
// limits, max pods) and on-demand prices of 1,101 real instance types, and the
// rule that turns a raw shape into node capacity and allocatable resources.
//
// It is the fallback and the local simulator's source of truth; in production
// the EC2 provider reads live DescribeInstanceTypes/pricing answers and only
// falls back to this table. It must not simulate anything (spot prices and
// per-zone availability belong to the emulator).
package catalog

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
)

//go:embed ec2-instance-types-us-east-1.json
var rawCatalog []byte

// rawLabels are Karpenter's further AWS labels per type (local NVMe, EBS and
// network bandwidth, CPU manufacturer and clock, encryption in transit,
// flex, GPU memory), taken from Karpenter's generated instance-type
// reference by local/tools/catalog_labels.py. Types the reference does not
// list have none.
//
//go:embed ec2-instance-type-labels-us-east-1.json
var rawLabels []byte

// GPU describes the accelerators an instance type advertises.
type GPU struct {
	Count        int    `json:"count"`
	Manufacturer string `json:"manufacturer"`
	Name         string `json:"name"`
	// Resource is the Kubernetes extended resource name (nvidia.com/gpu,
	// amd.com/gpu, habana.ai/gaudi, aws.amazon.com/neuron) or "".
	Resource string `json:"resource"`
}

// InstanceTypeSpec is one row of the catalog, as EC2 describes the type.
type InstanceTypeSpec struct {
	Name          string  `json:"name"`
	Family        string  `json:"family"`
	Category      string  `json:"category"`
	Generation    int     `json:"generation"`
	Size          string  `json:"size"`
	VCPU          int     `json:"vcpu"`
	MemoryMiB     int64   `json:"memoryMiB"`
	Arch          string  `json:"arch"`
	GPU           GPU     `json:"gpu"`
	MaxPods       int     `json:"maxPods"`
	ENIs          int     `json:"enis"`
	IPv4PerENI    int     `json:"ipv4PerEni"`
	Hypervisor    string  `json:"hypervisor"`
	BareMetal     bool    `json:"bareMetal"`
	OnDemandPrice float64 `json:"onDemandPrice"`
	// ExtraLabels are the type's further node labels under Millwright's
	// keys (millwright.dev/instance-local-nvme, ...), from rawLabels.
	ExtraLabels map[string]string `json:"-"`
}

// Catalog is the whole table: the region, its zones and every instance type,
// sorted by name.
type Catalog struct {
	Region        string             `json:"region"`
	Generated     string             `json:"generated"`
	Zones         []string           `json:"zones"`
	InstanceTypes []InstanceTypeSpec `json:"instanceTypes"`

	byName map[string]int
}

var (
	loadOnce sync.Once
	loaded   *Catalog
	loadErr  error
)

// Default returns the embedded catalog, parsed once. The returned value is
// shared: callers must not modify it.
func Default() (*Catalog, error) {
	loadOnce.Do(func() {
		loaded, loadErr = Parse(rawCatalog)
		if loadErr == nil {
			loadErr = loaded.AddLabels(rawLabels)
		}
	})
	return loaded, loadErr
}

// MustDefault is Default for callers that cannot proceed without the catalog
// (it is compiled into the binary, so failure is a build defect).
func MustDefault() *Catalog {
	c, err := Default()
	if err != nil {
		panic(err)
	}
	return c
}

// Parse reads a catalog in the embedded file's format.
func Parse(data []byte) (*Catalog, error) {
	var c Catalog
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("parsing instance-type catalog: %w", err)
	}
	if len(c.InstanceTypes) == 0 {
		return nil, fmt.Errorf("parsing instance-type catalog: no instanceTypes")
	}
	sort.Slice(c.InstanceTypes, func(i, j int) bool { return c.InstanceTypes[i].Name < c.InstanceTypes[j].Name })
	c.byName = make(map[string]int, len(c.InstanceTypes))
	for i, it := range c.InstanceTypes {
		if it.Name == "" || it.VCPU <= 0 || it.MemoryMiB <= 0 {
			return nil, fmt.Errorf("parsing instance-type catalog: instanceTypes[%d] (%q) lacks name, vcpu or memoryMiB", i, it.Name)
		}
		c.byName[it.Name] = i
	}
	return &c, nil
}

// Get returns the named instance type.
func (c *Catalog) Get(name string) (InstanceTypeSpec, bool) {
	i, ok := c.byName[name]
	if !ok {
		return InstanceTypeSpec{}, false
	}
	return c.InstanceTypes[i], true
}

// labelsFile is the format of the embedded labels file: per type name, the
// label keys without their domain (instance-local-nvme) and values.
type labelsFile struct {
	InstanceTypes map[string]map[string]string `json:"instanceTypes"`
}

// AddLabels attaches a labels file's labels to the catalog's types as
// ExtraLabels; names the catalog does not have are an error.
func (c *Catalog) AddLabels(data []byte) error {
	var f labelsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("parsing instance-type labels: %w", err)
	}
	for name, labels := range f.InstanceTypes {
		i, ok := c.byName[name]
		if !ok {
			return fmt.Errorf("parsing instance-type labels: instanceTypes[%q] is not in the catalog", name)
		}
		if len(labels) == 0 {
			continue
		}
		extra := make(map[string]string, len(labels))
		for k, v := range labels {
			extra[labelDomain+k] = v
		}
		c.InstanceTypes[i].ExtraLabels = extra
	}
	return nil
}

// labelDomain prefixes the labels file's keys.
const labelDomain = "millwright.dev/"

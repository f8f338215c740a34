package awsemu

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/millwright/millwright/local/awsemu/nodeadm"
	"github.com/millwright/millwright/model/catalog"
)

// NodeRegistrar is what a booted instance's kubelet and the cloud controller
// manager do to the cluster: create the instance's Node when it runs, delete
// it after the instance is gone. It is called concurrently for different
// instances (never for one instance twice at once).
type NodeRegistrar interface {
	// Register creates the Node. A Node of that name with the same provider
	// ID already existing is success (a kubelet re-registering).
	Register(ctx context.Context, node *corev1.Node) error
	// Deregister deletes the Node; a missing Node is success. A Node with
	// finalizers is only marked for deletion, as in a real cluster.
	Deregister(ctx context.Context, name string) error
}

// Labels and annotations the emulator puts on Nodes.
const (
	// LabelCapacityType is Millwright's capacity-type label (spot|on-demand).
	LabelCapacityType = "millwright.dev/capacity-type"
	// LabelZoneID is the AWS zone id (use1-az1).
	LabelZoneID = "topology.k8s.aws/zone-id"
	// AnnotationKwokNode makes the kwok controller play the Node's kubelet.
	AnnotationKwokNode = "kwok.x-k8s.io/node"
)

// NodeResources is the Node's capacity and allocatable for an instance type
// whose kubelet runs at most maxPods pods. It is the catalog's rule
// (catalog.InstanceTypeSpec.Capacity and Allocatable: EC2 memory as capacity,
// the hypervisor's share, kube-reserved, eviction thresholds and a 20Gi root
// volume held back from allocatable), so a registered Node has exactly the
// allocatable the planner assumed when it chose the type.
func NodeResources(it catalog.InstanceTypeSpec, maxPods int) (capacity, allocatable corev1.ResourceList) {
	it.MaxPods = maxPods
	return it.Capacity().ResourceList(), it.Allocatable().ResourceList()
}

// KubeletNodeResources is what a kubelet with max pods and the reserved and
// eviction settings of its configuration reports: pods capped by
// podsPerCore, allocatable less kube-reserved (nodeadm's defaults for the
// keys not set), system-reserved and the hard eviction thresholds (soft
// thresholds do not lower the kubelet's allocatable).
func KubeletNodeResources(it catalog.InstanceTypeSpec, maxPods int, r nodeadm.KubeletReservations) (capacity, allocatable corev1.ResourceList, err error) {
	it.MaxPods = maxPods
	c, a, err := it.KubeletAllocatable(&catalog.KubeletSettings{
		PodsPerCore: r.PodsPerCore, KubeReserved: r.KubeReserved, SystemReserved: r.SystemReserved,
		EvictionHard: r.EvictionHard, EvictionSoft: r.EvictionSoft,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet config: %w", err)
	}
	return c.ResourceList(), a.ResourceList(), nil
}

// nodeForInstanceLocked builds the Node a kubelet on inst would register,
// reading the labels, taints and max pods its userData asks for.
// The image decides how the userData is read: nodeadm on AL2023 (and on
// images not from the public set), bootstrap.sh on AL2, TOML settings on
// Bottlerocket, the EKS bootstrap PowerShell on Windows.
func (e *Emulator) nodeForInstanceLocked(inst *instance) (*corev1.Node, error) {
	im, _ := e.world.imageByID(inst.imageID)
	var cfg *nodeadm.NodeConfig
	if inst.userData != "" {
		raw, err := nodeadm.DecodeUserData(inst.userData)
		if err != nil {
			return nil, err
		}
		parse := nodeadm.Parse
		switch im.os {
		case osAL2:
			parse = nodeadm.ParseBootstrapScript
		case osBottlerocket:
			parse = nodeadm.ParseBottlerocket
		case osWindows:
			parse = nodeadm.ParseWindows
		}
		cfg, err = parse(raw)
		if err != nil && !nodeadm.IsNoNodeConfig(err) {
			return nil, fmt.Errorf("instance %s userData (%s): %w", inst.id, osName(im), err)
		}
	}
	return buildNode(nodeSpec{
		name: inst.privateDNS, instanceID: inst.id, zone: inst.zone, region: e.opts.Region,
		capacityType: inst.capacityType, spec: inst.spec, privateIP: inst.privateIP,
		kubeletVersion: "v" + e.opts.KubernetesVersion + ".0", image: im,
	}, cfg)
}

func osName(im image) string {
	if im.os == "" {
		return osAL2023
	}
	return im.os
}

type nodeSpec struct {
	name, instanceID string
	zone             zone
	region           string
	capacityType     string
	spec             catalog.InstanceTypeSpec
	privateIP        string
	kubeletVersion   string
	image            image
}

// osImage is what the Node's status reports about the operating system.
func (s nodeSpec) osImage() (os, osImage, kernel string) {
	switch s.image.os {
	case osWindows:
		return "windows", "Windows Server " + windowsVersion(s.image.windowsBuild) + " Datacenter", s.image.windowsBuild + ".6532"
	case osBottlerocket:
		return "linux", "Bottlerocket OS (aws-k8s)", "6.1.155"
	case osAL2:
		return "linux", "Amazon Linux 2", "5.10.245-241.976.amzn2." + kernelArch(s.spec.Arch)
	}
	return "linux", "Amazon Linux 2023.9.20261101", "6.1.155-176.282.amzn2023." + kernelArch(s.spec.Arch)
}

func windowsVersion(build string) string {
	for version, b := range windowsBuilds {
		if b == build {
			return version
		}
	}
	return ""
}

func buildNode(s nodeSpec, cfg *nodeadm.NodeConfig) (*corev1.Node, error) {
	osName, osImage, kernel := s.osImage()
	labels := map[string]string{
		corev1.LabelArchStable:              s.spec.Arch,
		corev1.LabelOSStable:                osName,
		corev1.LabelHostname:                s.name,
		corev1.LabelInstanceTypeStable:      s.spec.Name,
		corev1.LabelInstanceType:            s.spec.Name,
		corev1.LabelTopologyZone:            s.zone.name,
		corev1.LabelTopologyRegion:          s.region,
		corev1.LabelFailureDomainBetaZone:   s.zone.name,
		corev1.LabelFailureDomainBetaRegion: s.region,
		"beta.kubernetes.io/arch":           s.spec.Arch,
		"beta.kubernetes.io/os":             osName,
		LabelZoneID:                         s.zone.id,
		LabelCapacityType:                   s.capacityType,
	}
	if s.image.windowsBuild != "" {
		labels[corev1.LabelWindowsBuild] = s.image.windowsBuild
	}
	var taints []corev1.Taint
	maxPods := s.spec.MaxPods
	var reserved nodeadm.KubeletReservations
	if cfg != nil {
		extra, err := cfg.Labels()
		if err != nil {
			return nil, err
		}
		for k, v := range extra {
			labels[k] = v
		}
		if taints, err = cfg.Taints(); err != nil {
			return nil, err
		}
		if n, ok, err := cfg.MaxPods(); err != nil {
			return nil, err
		} else if ok {
			maxPods = n
		}
		if reserved, err = cfg.Reservations(); err != nil {
			return nil, err
		}
	}
	if maxPods <= 0 {
		maxPods = 110
	}
	capacity, allocatable, err := KubeletNodeResources(s.spec, maxPods, reserved)
	if err != nil {
		return nil, err
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   s.name,
			Labels: labels,
			Annotations: map[string]string{
				AnnotationKwokNode:                                       "fake",
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"alpha.kubernetes.io/provided-node-ip":                   s.privateIP,
			},
		},
		Spec: corev1.NodeSpec{
			ProviderID: fmt.Sprintf("aws:///%s/%s", s.zone.name, s.instanceID),
			Taints:     taints,
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Phase:       corev1.NodeRunning,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: s.privateIP},
				{Type: corev1.NodeInternalDNS, Address: s.name},
				{Type: corev1.NodeHostName, Address: s.name},
			},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               strings.ReplaceAll(s.instanceID, "i-", "ec2"),
				SystemUUID:              "ec2" + strings.TrimPrefix(s.instanceID, "i-"),
				BootID:                  hashHex(32, s.instanceID, "boot"),
				KernelVersion:           kernel,
				OSImage:                 osImage,
				ContainerRuntimeVersion: "containerd://2.1.4",
				KubeletVersion:          s.kubeletVersion,
				OperatingSystem:         osName,
				Architecture:            s.spec.Arch,
			},
		},
	}, nil
}

func kernelArch(arch string) string {
	if arch == "arm64" {
		return "aarch64"
	}
	return "x86_64"
}

// KubernetesRegistrar registers Nodes in a real cluster through client-go.
type KubernetesRegistrar struct {
	client kubernetes.Interface
}

// NewKubernetesRegistrar connects to the cluster cfg points at.
func NewKubernetesRegistrar(cfg *rest.Config) (*KubernetesRegistrar, error) {
	// Every kubelet has a client of its own; one client at client-go's
	// default 5 QPS would make the 50th Node of a burst wait ~20 s.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = registrarQPS, registrarBurst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("awsemu: Kubernetes client for Node registration: %w", err)
	}
	return &KubernetesRegistrar{client: cs}, nil
}

// The registrar's client rates: the kubelets of a few hundred instances
// registering at once.
const (
	registrarQPS   = 500
	registrarBurst = 1000
)

// NewKubernetesRegistrarForClient uses an existing clientset.
func NewKubernetesRegistrarForClient(client kubernetes.Interface) *KubernetesRegistrar {
	return &KubernetesRegistrar{client: client}
}

// Register creates the Node with its status (as a kubelet does on first
// registration).
func (r *KubernetesRegistrar) Register(ctx context.Context, node *corev1.Node) error {
	nodes := r.client.CoreV1().Nodes()
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := nodes.Get(ctx, node.Name, metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("Node %s exists but cannot be read: %w", node.Name, getErr)
		}
		if existing.Spec.ProviderID != node.Spec.ProviderID {
			return fmt.Errorf("Node %s already exists for provider ID %q, not %q (a stale Node from an earlier run?)",
				node.Name, existing.Spec.ProviderID, node.Spec.ProviderID)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating Node %s: %w", node.Name, err)
	}
	// The apiserver keeps a Node's status on create; should a version drop
	// it, set it the way a kubelet's first status update would.
	if len(created.Status.Capacity) == 0 {
		created.Status = node.Status
		if _, err := nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("setting Node %s status: %w", node.Name, err)
		}
	}
	return nil
}

// Deregister deletes the Node.
func (r *KubernetesRegistrar) Deregister(ctx context.Context, name string) error {
	err := r.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Node %s: %w", name, err)
	}
	return nil
}

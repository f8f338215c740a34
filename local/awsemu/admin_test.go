package awsemu

import (
	"net"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/millwright/millwright/model/catalog"
)

func TestAdminStateShowsLeaks(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.BootDelay = time.Second; o.ShutdownDelay = time.Second })
	kept := h.runOne("m5.large", map[string]string{"purpose": "kept"})
	gone := h.runOne("m5.large", map[string]string{"purpose": "gone"})
	if _, err := h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{gone}}); err != nil {
		t.Fatal(err)
	}
	h.step(time.Second)
	st, err := h.admin.State(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Instances) != 2 {
		t.Fatalf("%d instances in the dump", len(st.Instances))
	}
	live := st.LiveInstances()
	if len(live) != 1 || live[0].ID != kept || live[0].State != "running" || live[0].Tags["purpose"] != "kept" || !live[0].NodeRegistered {
		t.Errorf("live instances %+v", live)
	}
	if g, _ := st.Instance(gone); g.State != "terminated" || g.StateReason != "Client.UserInitiatedShutdown" {
		t.Errorf("terminated instance %+v", g)
	}
}

func TestAdminFaultsOverHTTP(t *testing.T) {
	h := newHarness(t)
	if err := h.admin.AddCapacityFault(h.ctx, CapacityFault{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}); err != nil {
		t.Fatal(err)
	}
	if err := h.admin.AddCapacityFault(h.ctx, CapacityFault{InstanceType: "no.such"}); err == nil {
		t.Error("a fault for an unknown type was accepted")
	}
	if err := h.admin.SetThrottle(h.ctx, ThrottleFault{Rate: 2}); err == nil {
		t.Error("a throttle rate of 2 was accepted")
	}
	f, err := h.admin.Faults(h.ctx)
	if err != nil || len(f.Capacity) != 1 || f.Throttle != nil {
		t.Fatalf("faults %+v %v", f, err)
	}
	if err := h.admin.RemoveCapacityFault(h.ctx, CapacityFault{InstanceType: "c5.large"}); err == nil {
		t.Error("removing an absent fault succeeded")
	}
	if err := h.admin.ClearCapacityFaults(h.ctx); err != nil {
		t.Fatal(err)
	}
	if f, _ := h.admin.Faults(h.ctx); len(f.Capacity) != 0 {
		t.Errorf("faults after clearing %+v", f)
	}
	cfg, err := h.admin.EventConfig(h.ctx)
	if err != nil || cfg.Queue != "" {
		t.Errorf("event config %+v %v", cfg, err)
	}
}

func TestStartServesOnALocalPort(t *testing.T) {
	emu, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	if err := emu.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	host, _, err := net.SplitHostPort(emu.URL()[len("http://"):])
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("URL %q", emu.URL())
	}
	client := ec2.NewFromConfig(sdkConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(emu.URL()) })
	out, err := client.DescribeAvailabilityZones(t.Context(), &ec2.DescribeAvailabilityZonesInput{})
	if err != nil || len(out.AvailabilityZones) != 3 {
		t.Errorf("DescribeAvailabilityZones over a real listener: %v", err)
	}
}

func TestNodeResources(t *testing.T) {
	cat := catalog.MustDefault()
	tests := []struct {
		instanceType string
		maxPods      int
		wantCPU      string // allocatable
		wantGPU      int64
	}{
		{"m5.large", 29, "1930m", 0},
		{"m5.4xlarge", 234, "15890m", 0},
		{"g5.xlarge", 58, "3920m", 1},
	}
	for _, tc := range tests {
		t.Run(tc.instanceType, func(t *testing.T) {
			spec, _ := cat.Get(tc.instanceType)
			capacity, allocatable := NodeResources(spec, tc.maxPods)
			if got := allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse(tc.wantCPU)) != 0 {
				t.Errorf("allocatable cpu %s, want %s", got.String(), tc.wantCPU)
			}
			if c := capacity[corev1.ResourceCPU]; c.Value() != int64(spec.VCPU) {
				t.Errorf("capacity cpu %s", c.String())
			}
			mem, allocMem := capacity[corev1.ResourceMemory], allocatable[corev1.ResourceMemory]
			if mem.Value() != spec.MemoryMiB*1024*1024 || allocMem.Cmp(mem) >= 0 {
				t.Errorf("memory capacity %s allocatable %s for %d MiB", mem.String(), allocMem.String(), spec.MemoryMiB)
			}
			if gpu := capacity["nvidia.com/gpu"]; gpu.Value() != tc.wantGPU {
				t.Errorf("GPUs %s, want %d", gpu.String(), tc.wantGPU)
			}
			if pods := capacity[corev1.ResourcePods]; pods.Value() != int64(tc.maxPods) {
				t.Errorf("pods %s, want the kubelet's max pods %d", pods.String(), tc.maxPods)
			}
			spec.MaxPods = tc.maxPods
			if want := spec.Allocatable().ResourceList(); !equalResourceLists(allocatable, want) {
				t.Errorf("allocatable %v, want the catalog's %v", allocatable, want)
			}
		})
	}
}

func equalResourceLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if other, ok := b[name]; !ok || other.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

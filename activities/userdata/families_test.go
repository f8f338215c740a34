package userdata

import (
	"reflect"
	"strings"
	"testing"

	"github.com/millwright/millwright/local/awsemu/nodeadm"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

func baseBootstrap() Bootstrap {
	b := baseUserData()
	return Bootstrap{Cluster: b.Cluster, Labels: b.Labels, Taints: b.Taints, MaxPods: 58, ClusterDNS: []string{"10.96.0.10"}}
}

type familyBuilder struct {
	name  string
	build func(Bootstrap) ([]byte, error)
	parse func([]byte) (*nodeadm.NodeConfig, error)
}

var familyBuilders = []familyBuilder{
	{"AL2", func(b Bootstrap) ([]byte, error) { return AL2{b}.Build() }, nodeadm.ParseBootstrapScript},
	{"Bottlerocket", func(b Bootstrap) ([]byte, error) { return Bottlerocket{b}.Build() }, nodeadm.ParseBottlerocket},
	{"Windows", func(b Bootstrap) ([]byte, error) { return Windows{b}.Build() }, nodeadm.ParseWindows},
}

// Every family's userData reads back, through the emulator's parser for
// that family, as the cluster, labels, taints and max pods it was built
// with; the class's own userData is kept.
func TestFamiliesRoundTrip(t *testing.T) {
	custom := map[string]string{
		"AL2":          "#!/bin/bash\necho custom\n",
		"Bottlerocket": "[settings.host-containers.admin]\nenabled = true\n",
		"Windows":      "<powershell>\nWrite-Host custom\n</powershell>",
	}
	for _, f := range familyBuilders {
		t.Run(f.name, func(t *testing.T) {
			b := baseBootstrap()
			b.Custom = custom[f.name]
			raw, err := f.build(b)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(raw), strings.Trim(strings.Split(custom[f.name], "\n")[1], " ")) {
				t.Errorf("the class's userData is lost:\n%s", raw)
			}
			cfg, err := f.parse(raw)
			if err != nil {
				t.Fatalf("parse: %v\n%s", err, raw)
			}
			if cfg.Cluster.Name != "c1" || cfg.Cluster.APIServerEndpoint != "https://127.0.0.1:6443" {
				t.Errorf("cluster %+v", cfg.Cluster)
			}
			labels, err := cfg.Labels()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(labels, b.Labels) {
				t.Errorf("labels %v, want %v", labels, b.Labels)
			}
			taints, err := cfg.Taints()
			if err != nil {
				t.Fatal(err)
			}
			if len(taints) != len(b.Taints) {
				t.Errorf("taints %v, want %v", taints, b.Taints)
			}
			if n, ok, err := cfg.MaxPods(); err != nil || !ok || n != 58 {
				t.Errorf("max pods %d %v %v", n, ok, err)
			}
		})
	}
}

// The class's kubelet settings reach each format under its own names.
func TestFamiliesKubeletSettings(t *testing.T) {
	b := baseBootstrap()
	b.Kubelet = &apisv1.KubeletConfiguration{
		PodsPerCore:    ptr(int32(4)),
		SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi"},
		EvictionHard:   map[string]string{"memory.available": "5%"},
		CPUCFSQuota:    ptr(false),
	}
	b.RAID0 = true
	want := map[string][]string{
		"AL2":          {`--pods-per-core=4`, `--system-reserved="cpu=100m,memory=100Mi"`, `--eviction-hard="memory.available<5%"`, `--cpu-cfs-quota=false`, `--local-disks raid0`, `--dns-cluster-ip '10.96.0.10'`, `--use-max-pods false`},
		"Bottlerocket": {`cpu-cfs-quota-enforced = false`, `[settings.kubernetes.system-reserved]`, `"memory.available" = "5%"`, `[settings.bootstrap-commands.000-mount-instance-storage]`, `cluster-dns-ip = "10.96.0.10"`},
	}
	for _, f := range familyBuilders[:2] {
		raw, err := f.build(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want[f.name] {
			if !strings.Contains(string(raw), w) {
				t.Errorf("%s userData lacks %s:\n%s", f.name, w, raw)
			}
		}
	}
	if _, err := (Windows{b}).Build(); !IsInvalidUserData(err) || !strings.Contains(err.Error(), "spec.instanceStorePolicy") {
		t.Errorf("Windows with RAID0: %v, want an invalid userData error naming spec.instanceStorePolicy", err)
	}
}

// Karpenter replaces a Bottlerocket class's node-taints with the pool's and
// merges its node-labels under Millwright's.
func TestBottlerocketMergesLabelsAndReplacesTaints(t *testing.T) {
	b := baseBootstrap()
	b.Custom = "[settings.kubernetes.node-labels]\nteam = 'from-class'\nextra = 'kept'\n[settings.kubernetes.node-taints]\nold = ['x:NoSchedule']\n"
	raw, err := Bottlerocket{b}.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := nodeadm.ParseBottlerocket(raw)
	if err != nil {
		t.Fatal(err)
	}
	labels, _ := cfg.Labels()
	if labels["team"] != "a" || labels["extra"] != "kept" {
		t.Errorf("labels %v: want Millwright's team and the class's extra", labels)
	}
	taints, _ := cfg.Taints()
	for _, taint := range taints {
		if taint.Key == "old" {
			t.Errorf("taints %v still hold the class's own", taints)
		}
	}
	if _, err := (Bottlerocket{Bootstrap{Cluster: testCluster(), Custom: "not = [toml"}}).Build(); !IsInvalidUserData(err) {
		t.Errorf("broken TOML: %v, want an invalid userData error", err)
	}
}

func ptr[T any](v T) *T { return &v }

package userdata

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/local/awsemu/nodeadm"
)

func testCluster() Cluster {
	return Cluster{
		Name:                 "c1",
		APIServerEndpoint:    "https://127.0.0.1:6443",
		CertificateAuthority: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
		ServiceCIDR:          "10.96.0.0/12",
	}
}

func baseUserData() AL2023 {
	return AL2023{
		Cluster: testCluster(),
		Labels: map[string]string{
			"millwright.dev/nodepool":      "default",
			"millwright.dev/nodeclaim":     "default-abc12",
			"millwright.dev/capacity-type": "spot",
			"team":                         "a",
		},
		Taints: []corev1.Taint{
			{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
			{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule},
			{Key: "millwright.dev/unregistered", Effect: corev1.TaintEffectNoExecute},
		},
	}
}

// The emulator registers Nodes from what nodeadm would read; whatever the
// builder writes must come back unchanged through that parser.
func TestRoundTripThroughNodeadmParser(t *testing.T) {
	cases := []struct {
		name       string
		mutate     func(*AL2023)
		wantLabels map[string]string
		wantTaints []corev1.Taint
		wantMax    int
	}{
		{
			name:       "labels and taints",
			mutate:     func(*AL2023) {},
			wantLabels: baseUserData().Labels,
			wantTaints: baseUserData().Taints,
		},
		{
			name: "restricted kubernetes.io labels are left to RegisterNode",
			mutate: func(u *AL2023) {
				u.Labels["node-role.kubernetes.io/worker"] = ""
				u.Labels["node.kubernetes.io/instance-type"] = "m5.large"
				u.Labels["example.k8s.io/x"] = "y"
			},
			wantLabels: func() map[string]string {
				l := baseUserData().Labels
				l["node.kubernetes.io/instance-type"] = "m5.large"
				return l
			}(),
			wantTaints: baseUserData().Taints,
		},
		{
			name: "duplicate taints collapse",
			mutate: func(u *AL2023) {
				u.Taints = append(u.Taints, corev1.Taint{Key: "dedicated", Value: "other", Effect: corev1.TaintEffectNoSchedule})
			},
			wantLabels: baseUserData().Labels,
			wantTaints: baseUserData().Taints,
		},
		{
			name:       "max pods",
			mutate:     func(u *AL2023) { u.MaxPods = 58 },
			wantLabels: baseUserData().Labels,
			wantTaints: baseUserData().Taints,
			wantMax:    58,
		},
		{
			name: "custom NodeConfig merges, ours wins for labels",
			mutate: func(u *AL2023) {
				u.Custom = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 17\n    flags:\n    - --node-labels=team=b,custom=yes\n"
			},
			wantLabels: func() map[string]string {
				l := baseUserData().Labels
				l["custom"] = "yes"
				return l
			}(),
			wantTaints: baseUserData().Taints,
			wantMax:    17,
		},
		{
			name: "custom MIME document keeps its parts",
			mutate: func(u *AL2023) {
				u.Custom = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hello\n--//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n    - --register-with-taints=custom=true:PreferNoSchedule\n--//--\n"
			},
			wantLabels: baseUserData().Labels,
			wantTaints: append([]corev1.Taint{{Key: "custom", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}}, baseUserData().Taints...),
		},
		{
			name:       "custom shell script",
			mutate:     func(u *AL2023) { u.Custom = "#!/bin/bash\necho hi\n" },
			wantLabels: baseUserData().Labels,
			wantTaints: baseUserData().Taints,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := baseUserData()
			tc.mutate(&u)
			encoded, err := u.BuildBase64()
			if err != nil {
				t.Fatal(err)
			}
			raw, err := nodeadm.DecodeUserData(encoded)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := nodeadm.Parse(raw)
			if err != nil {
				t.Fatalf("parse: %v\n%s", err, raw)
			}
			if cfg.Cluster.Name != "c1" || cfg.Cluster.APIServerEndpoint != "https://127.0.0.1:6443" ||
				string(cfg.Cluster.CertificateAuthority) != string(testCluster().CertificateAuthority) || cfg.Cluster.CIDR != "10.96.0.0/12" {
				t.Errorf("cluster details = %+v", cfg.Cluster)
			}
			labels, err := cfg.Labels()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(labels, tc.wantLabels) {
				t.Errorf("labels = %v, want %v", labels, tc.wantLabels)
			}
			taints, err := cfg.Taints()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(taints, tc.wantTaints) {
				t.Errorf("taints = %v, want %v", taints, tc.wantTaints)
			}
			maxPods, ok, err := cfg.MaxPods()
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantMax == 0 && ok {
				t.Errorf("maxPods = %d, want unset", maxPods)
			}
			if tc.wantMax != 0 && maxPods != tc.wantMax {
				t.Errorf("maxPods = %d (set=%v), want %d", maxPods, ok, tc.wantMax)
			}
			if strings.Contains(tc.name, "shell") || strings.Contains(tc.name, "MIME") {
				if !strings.Contains(string(raw), "#!/bin/bash") {
					t.Errorf("custom script part lost:\n%s", raw)
				}
			}
		})
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	first, err := baseUserData().Build()
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		again, err := baseUserData().Build()
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(first) {
			t.Fatalf("same input gave different userData:\n%s\n---\n%s", first, again)
		}
	}
}

func TestBuildRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*AL2023)
		want   string
	}{
		{name: "no cluster name", mutate: func(u *AL2023) { u.Cluster.Name = "" }, want: "cluster name"},
		{name: "no endpoint", mutate: func(u *AL2023) { u.Cluster.APIServerEndpoint = "" }, want: "endpoint"},
		{name: "no CA", mutate: func(u *AL2023) { u.Cluster.CertificateAuthority = nil }, want: "certificate authority"},
		{name: "multipart without boundary", mutate: func(u *AL2023) { u.Custom = "Content-Type: multipart/mixed\n\nbody" }, want: "spec.userData"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := baseUserData()
			tc.mutate(&u)
			_, err := u.Build()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
	u := baseUserData()
	u.Custom = "Content-Type: multipart/mixed\n\nbody"
	if _, err := u.Build(); !IsInvalidUserData(err) {
		t.Fatalf("custom userData error %v is not IsInvalidUserData", err)
	}
}

func TestRawIsNotBase64Twice(t *testing.T) {
	encoded, err := baseUserData().BuildBase64()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(encoded)
	if !strings.HasPrefix(string(raw), "MIME-Version: 1.0") {
		t.Fatalf("decoded userData does not start with MIME headers:\n%s", raw)
	}
}

// Reserved resources, eviction thresholds, image GC thresholds and the CFS
// quota reach the kubelet
// configuration under their KubeletConfiguration names.
func TestKubeletReservationsReachNodeadm(t *testing.T) {
	u := baseUserData()
	u.PodsPerCore = 4
	u.KubeReserved = map[string]string{"cpu": "300m"}
	u.SystemReserved = map[string]string{"memory": "512Mi"}
	u.EvictionHard = map[string]string{"memory.available": "300Mi"}
	u.EvictionSoft = map[string]string{"memory.available": "500Mi"}
	u.EvictionSoftGracePeriod = map[string]string{"memory.available": "1m"}
	u.EvictionMaxPodGracePeriod = 60
	high, low, quota := int32(85), int32(80), false
	u.ImageGCHighThresholdPercent, u.ImageGCLowThresholdPercent, u.CPUCFSQuota = &high, &low, &quota
	raw, err := u.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := nodeadm.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cfg.Reservations()
	if err != nil {
		t.Fatal(err)
	}
	if r.PodsPerCore == nil || *r.PodsPerCore != 4 || r.KubeReserved["cpu"] != "300m" || r.SystemReserved["memory"] != "512Mi" ||
		r.EvictionHard["memory.available"] != "300Mi" || r.EvictionSoft["memory.available"] != "500Mi" {
		t.Errorf("reservations = %+v", r)
	}
	grace, _ := cfg.Kubelet.Config["evictionSoftGracePeriod"].(map[string]any)
	if grace["memory.available"] != "1m" || cfg.Kubelet.Config["evictionMaxPodGracePeriod"] != float64(60) ||
		cfg.Kubelet.Config["imageGCHighThresholdPercent"] != float64(85) || cfg.Kubelet.Config["imageGCLowThresholdPercent"] != float64(80) ||
		cfg.Kubelet.Config["cpuCFSQuota"] != false {
		t.Errorf("kubelet config = %v", cfg.Kubelet.Config)
	}
}

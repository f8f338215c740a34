package userdata

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/BurntSushi/toml"
)

// Bottlerocket is the userData of a Bottlerocket node: TOML settings. The
// class's own TOML is the starting point; Millwright then sets, as
// Karpenter does, settings.kubernetes' cluster-name, api-server,
// cluster-certificate, cluster-dns-ip, max-pods and kubelet settings,
// merges its node-labels over the class's, replaces node-taints with the
// pool's, and for instanceStorePolicy RAID0 adds the bootstrap command that
// puts the kubelet and containerd on the striped instance store. Settings
// it does not own are kept as written.
type Bottlerocket struct{ Bootstrap }

// Build returns the raw userData.
func (u Bottlerocket) Build() ([]byte, error) {
	if err := u.Cluster.validate(); err != nil {
		return nil, err
	}
	doc := map[string]any{}
	if _, err := toml.Decode(u.Custom, &doc); err != nil {
		return nil, fmt.Errorf("%w: spec.userData: Bottlerocket settings are not TOML: %v", ErrInvalidUserData, err)
	}
	settings, err := table(doc, "settings")
	if err != nil {
		return nil, err
	}
	k8s, err := table(settings, "kubernetes")
	if err != nil {
		return nil, err
	}
	k8s["cluster-name"] = u.Cluster.Name
	k8s["api-server"] = u.Cluster.APIServerEndpoint
	k8s["cluster-certificate"] = base64.StdEncoding.EncodeToString(u.Cluster.CertificateAuthority)
	if len(u.ClusterDNS) > 0 {
		k8s["cluster-dns-ip"] = u.ClusterDNS[0]
	}
	if u.MaxPods > 0 {
		k8s["max-pods"] = int64(u.MaxPods)
	}
	labels, err := table(k8s, "node-labels")
	if err != nil {
		return nil, err
	}
	for key, value := range u.Labels {
		if KubeletMaySetLabel(key) {
			labels[key] = value
		}
	}
	if len(labels) == 0 {
		delete(k8s, "node-labels")
	}
	taints := map[string]any{}
	seen := map[string]bool{}
	for _, t := range u.Taints {
		if id := t.Key + ":" + string(t.Effect); !seen[id] {
			seen[id] = true
			list, _ := taints[t.Key].([]any)
			taints[t.Key] = append(list, t.Value+":"+string(t.Effect))
		}
	}
	delete(k8s, "node-taints")
	if len(taints) > 0 {
		k8s["node-taints"] = taints
	}
	u.kubeletSettings(k8s)
	if u.RAID0 {
		commands, err := table(settings, "bootstrap-commands")
		if err != nil {
			return nil, err
		}
		commands["000-mount-instance-storage"] = map[string]any{
			"commands": []any{
				[]any{"apiclient", "ephemeral-storage", "init"},
				[]any{"apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"},
			},
			"essential": true,
			"mode":      "always",
		}
	}
	var out bytes.Buffer
	if err := toml.NewEncoder(&out).Encode(doc); err != nil {
		return nil, fmt.Errorf("userData: encoding Bottlerocket settings: %w", err)
	}
	return out.Bytes(), nil
}

// kubeletSettings writes the class's kubelet settings under Bottlerocket's
// names.
func (u Bottlerocket) kubeletSettings(k8s map[string]any) {
	k := u.Kubelet
	if k == nil {
		return
	}
	strings := func(m map[string]string) map[string]any {
		out := make(map[string]any, len(m))
		for key, v := range m {
			out[key] = v
		}
		return out
	}
	if len(k.SystemReserved) > 0 {
		k8s["system-reserved"] = strings(k.SystemReserved)
	}
	if len(k.KubeReserved) > 0 {
		k8s["kube-reserved"] = strings(k.KubeReserved)
	}
	if len(k.EvictionHard) > 0 {
		k8s["eviction-hard"] = strings(k.EvictionHard)
	}
	if len(k.EvictionSoft) > 0 {
		k8s["eviction-soft"] = strings(k.EvictionSoft)
	}
	if len(k.EvictionSoftGracePeriod) > 0 {
		grace := map[string]any{}
		for signal, d := range k.EvictionSoftGracePeriod {
			grace[signal] = string(d)
		}
		k8s["eviction-soft-grace-period"] = grace
	}
	if k.EvictionMaxPodGracePeriod != nil {
		k8s["eviction-max-pod-grace-period"] = int64(*k.EvictionMaxPodGracePeriod)
	}
	if k.ImageGCHighThresholdPercent != nil {
		k8s["image-gc-high-threshold-percent"] = strconv.Itoa(int(*k.ImageGCHighThresholdPercent))
	}
	if k.ImageGCLowThresholdPercent != nil {
		k8s["image-gc-low-threshold-percent"] = strconv.Itoa(int(*k.ImageGCLowThresholdPercent))
	}
	if k.CPUCFSQuota != nil {
		k8s["cpu-cfs-quota-enforced"] = *k.CPUCFSQuota
	}
}

// BuildBase64 returns the userData as EC2 takes it.
func (u Bottlerocket) BuildBase64() (string, error) { return base64Of(u.Build()) }

// table returns parent[key] as a TOML table, creating it when missing.
func table(parent map[string]any, key string) (map[string]any, error) {
	v, ok := parent[key]
	if !ok {
		t := map[string]any{}
		parent[key] = t
		return t, nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: spec.userData: Bottlerocket setting %q is a %T, not a table", ErrInvalidUserData, key, v)
	}
	return t, nil
}

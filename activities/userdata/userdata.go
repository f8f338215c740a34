// Package userdata owns the EC2 userData Millwright gives its nodes, one
// format per AMI family, each merged with the EC2NodeClass's own userData
// the way Karpenter merges it: for AL2023 a MIME multi-part document
// carrying a nodeadm `node.eks.aws/v1alpha1` NodeConfig (AL2023); for AL2 a
// MIME document ending in /etc/eks/bootstrap.sh (AL2); for Bottlerocket
// TOML settings (Bottlerocket); for Windows the EKS bootstrap PowerShell
// (Windows). Each joins the node to the cluster with its labels, taints and
// kubelet settings.
//
// It only builds documents; it does not talk to EC2 or Kubernetes. The output
// is deterministic (same input, same bytes), because the launcher names
// launch templates after a hash of it.
package userdata

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// MIME content types of userData parts.
const (
	// NodeConfigContentType is nodeadm's part type for NodeConfig documents.
	NodeConfigContentType = "application/node.eks.aws"
	shellScriptType       = "text/x-shellscript"
	cloudConfigType       = "text/cloud-config"
	nodeConfigAPIVersion  = "node.eks.aws/v1alpha1"
	nodeConfigKind        = "NodeConfig"
)

// ErrInvalidUserData is wrapped by errors about a NodeClass's custom userData.
var ErrInvalidUserData = errors.New("invalid userData")

// IsInvalidUserData reports whether err is about unusable custom userData.
func IsInvalidUserData(err error) bool { return errors.Is(err, ErrInvalidUserData) }

// Cluster is what a node needs to find and trust the API server.
type Cluster struct {
	Name string
	// APIServerEndpoint is the https URL of the API server.
	APIServerEndpoint string
	// CertificateAuthority is the PEM bundle of the cluster CA.
	CertificateAuthority []byte
	// ServiceCIDR is the cluster's service IP range (nodeadm derives the
	// cluster DNS address from it).
	ServiceCIDR string
}

// AL2023 describes the userData of one AL2023 node.
type AL2023 struct {
	Cluster Cluster
	// Labels are passed as --node-labels. Keys the kubelet may not set on
	// its own Node (kubernetes.io and k8s.io namespaces outside the kubelet's
	// allowed set) are left out: kubelet refuses to start with them, and
	// RegisterNode applies them instead.
	Labels map[string]string
	// Taints are passed as --register-with-taints in order, duplicates
	// (same key and effect) dropped.
	Taints []corev1.Taint
	// MaxPods, when positive, sets the kubelet's maxPods.
	MaxPods int32
	// ClusterDNS, when set, overrides the kubelet's clusterDNS.
	ClusterDNS []string
	// PodsPerCore, when positive, sets the kubelet's podsPerCore.
	PodsPerCore int32
	// KubeReserved, SystemReserved, EvictionHard, EvictionSoft and
	// EvictionSoftGracePeriod, when set, go to the kubelet configuration
	// under their KubeletConfiguration names; EvictionMaxPodGracePeriod
	// when positive.
	KubeReserved, SystemReserved map[string]string
	EvictionHard, EvictionSoft   map[string]string
	EvictionSoftGracePeriod      map[string]string
	EvictionMaxPodGracePeriod    int32
	// ImageGCHighThresholdPercent, ImageGCLowThresholdPercent and
	// CPUCFSQuota, when set, go to the kubelet configuration under their
	// KubeletConfiguration names.
	ImageGCHighThresholdPercent, ImageGCLowThresholdPercent *int32
	CPUCFSQuota                                             *bool
	// RAID0 asks nodeadm to stripe the instance-store disks for the
	// kubelet and containerd (instanceStorePolicy: RAID0).
	RAID0 bool
	// Custom is the EC2NodeClass's spec.userData: a MIME multi-part
	// document, a NodeConfig YAML document, a shell script or cloud-config.
	// Its parts come first so that Millwright's NodeConfig, merged last by
	// nodeadm, wins for the cluster details and adds its flags.
	Custom string
}

type nodeConfigDocument struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       nodeConfigSpec `json:"spec"`
}

type nodeConfigSpec struct {
	Cluster  nodeConfigCluster   `json:"cluster"`
	Kubelet  nodeConfigKubelet   `json:"kubelet"`
	Instance *nodeConfigInstance `json:"instance,omitempty"`
}

type nodeConfigInstance struct {
	LocalStorage nodeConfigLocalStorage `json:"localStorage"`
}

type nodeConfigLocalStorage struct {
	Strategy string `json:"strategy"`
}

type nodeConfigCluster struct {
	Name              string `json:"name"`
	APIServerEndpoint string `json:"apiServerEndpoint"`
	// CertificateAuthority is []byte so that it is written base64, as
	// nodeadm expects.
	CertificateAuthority []byte `json:"certificateAuthority"`
	CIDR                 string `json:"cidr,omitempty"`
}

type nodeConfigKubelet struct {
	Config map[string]any `json:"config,omitempty"`
	Flags  []string       `json:"flags,omitempty"`
}

// part is one MIME part of the output.
type part struct {
	header textproto.MIMEHeader
	body   []byte
}

// Build returns the raw (not base64-encoded) userData.
func (u AL2023) Build() ([]byte, error) {
	if err := u.Cluster.validate(); err != nil {
		return nil, err
	}
	parts, err := customParts(u.Custom)
	if err != nil {
		return nil, err
	}
	ours, err := u.nodeConfig()
	if err != nil {
		return nil, err
	}
	parts = append(parts, part{header: textproto.MIMEHeader{"Content-Type": {NodeConfigContentType}}, body: ours})
	return writeMultipart(parts)
}

// BuildBase64 returns the userData as EC2 takes it.
func (u AL2023) BuildBase64() (string, error) { return base64Of(u.Build()) }

// base64Of encodes a built userData as EC2 takes it.
func base64Of(raw []byte, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(raw), nil
}

func (c Cluster) validate() error {
	switch {
	case c.Name == "":
		return errors.New("userData: cluster name is empty")
	case c.APIServerEndpoint == "":
		return errors.New("userData: cluster API server endpoint is empty")
	case len(c.CertificateAuthority) == 0:
		return errors.New("userData: cluster certificate authority is empty")
	}
	return nil
}

func (u AL2023) nodeConfig() ([]byte, error) {
	doc := nodeConfigDocument{
		APIVersion: nodeConfigAPIVersion,
		Kind:       nodeConfigKind,
		Spec: nodeConfigSpec{
			Cluster: nodeConfigCluster{
				Name:                 u.Cluster.Name,
				APIServerEndpoint:    u.Cluster.APIServerEndpoint,
				CertificateAuthority: u.Cluster.CertificateAuthority,
				CIDR:                 u.Cluster.ServiceCIDR,
			},
		},
	}
	if u.RAID0 {
		doc.Spec.Instance = &nodeConfigInstance{LocalStorage: nodeConfigLocalStorage{Strategy: "RAID0"}}
	}
	config := map[string]any{}
	if u.MaxPods > 0 {
		config["maxPods"] = u.MaxPods
	}
	if len(u.ClusterDNS) > 0 {
		config["clusterDNS"] = u.ClusterDNS
	}
	if u.PodsPerCore > 0 {
		config["podsPerCore"] = u.PodsPerCore
	}
	for key, m := range map[string]map[string]string{
		"kubeReserved": u.KubeReserved, "systemReserved": u.SystemReserved,
		"evictionHard": u.EvictionHard, "evictionSoft": u.EvictionSoft, "evictionSoftGracePeriod": u.EvictionSoftGracePeriod,
	} {
		if len(m) > 0 {
			config[key] = m
		}
	}
	if u.EvictionMaxPodGracePeriod > 0 {
		config["evictionMaxPodGracePeriod"] = u.EvictionMaxPodGracePeriod
	}
	if u.ImageGCHighThresholdPercent != nil {
		config["imageGCHighThresholdPercent"] = *u.ImageGCHighThresholdPercent
	}
	if u.ImageGCLowThresholdPercent != nil {
		config["imageGCLowThresholdPercent"] = *u.ImageGCLowThresholdPercent
	}
	if u.CPUCFSQuota != nil {
		config["cpuCFSQuota"] = *u.CPUCFSQuota
	}
	if len(config) > 0 {
		doc.Spec.Kubelet.Config = config
	}
	if labels := NodeLabelsFlag(u.Labels); labels != "" {
		doc.Spec.Kubelet.Flags = append(doc.Spec.Kubelet.Flags, "--node-labels="+labels)
	}
	if taints := RegisterWithTaintsFlag(u.Taints); taints != "" {
		doc.Spec.Kubelet.Flags = append(doc.Spec.Kubelet.Flags, "--register-with-taints="+taints)
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("userData: encoding NodeConfig: %w", err)
	}
	return out, nil
}

// NodeLabelsFlag renders labels as the value of kubelet's --node-labels
// (k=v,k2=v2, sorted by key), leaving out the keys a kubelet may not set on
// its own Node.
func NodeLabelsFlag(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if KubeletMaySetLabel(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + labels[k]
	}
	return strings.Join(pairs, ",")
}

// RegisterWithTaintsFlag renders taints as the value of kubelet's
// --register-with-taints (key=value:Effect,...), in order, without
// duplicates of the same key and effect.
func RegisterWithTaintsFlag(taints []corev1.Taint) string {
	seen := map[string]bool{}
	var specs []string
	for _, t := range taints {
		id := t.Key + ":" + string(t.Effect)
		if seen[id] {
			continue
		}
		seen[id] = true
		spec := t.Key
		if t.Value != "" {
			spec += "=" + t.Value
		}
		specs = append(specs, spec+":"+string(t.Effect))
	}
	return strings.Join(specs, ",")
}

// The kubelet's own rule (k8s.io/kubelet/pkg/apis.IsKubeletLabel, enforced
// by the NodeRestriction admission plugin and by kubelet at start-up): in the
// kubernetes.io and k8s.io namespaces a kubelet may set only these keys and
// keys under kubelet.kubernetes.io and node.kubernetes.io. Copied rather than
// imported to keep the k8s.io/kubelet module out of go.mod for one list.
var kubeletLabels = map[string]bool{
	corev1.LabelHostname:                true,
	corev1.LabelTopologyZone:            true,
	corev1.LabelTopologyRegion:          true,
	corev1.LabelFailureDomainBetaZone:   true,
	corev1.LabelFailureDomainBetaRegion: true,
	corev1.LabelInstanceType:            true,
	corev1.LabelInstanceTypeStable:      true,
	corev1.LabelOSStable:                true,
	corev1.LabelArchStable:              true,
	"beta.kubernetes.io/os":             true,
	"beta.kubernetes.io/arch":           true,
}

// KubeletMaySetLabel reports whether a kubelet may put the label key on its
// own Node with --node-labels.
func KubeletMaySetLabel(key string) bool {
	if kubeletLabels[key] {
		return true
	}
	namespace, _, found := strings.Cut(key, "/")
	if !found {
		return true
	}
	for _, allowed := range []string{corev1.LabelNamespaceSuffixKubelet, corev1.LabelNamespaceSuffixNode} {
		if namespace == allowed || strings.HasSuffix(namespace, "."+allowed) {
			return true
		}
	}
	for _, restricted := range []string{"kubernetes.io", "k8s.io"} {
		if namespace == restricted || strings.HasSuffix(namespace, "."+restricted) {
			return false
		}
	}
	return true
}

// customParts splits a NodeClass's userData into MIME parts.
func customParts(custom string) ([]part, error) {
	trimmed := strings.TrimLeft(custom, " \t\r\n")
	if trimmed == "" {
		return nil, nil
	}
	lower := strings.ToLower(trimmed)
	if strings.HasPrefix(lower, "mime-version:") || strings.HasPrefix(lower, "content-type:") {
		return mimeParts(trimmed)
	}
	contentType := NodeConfigContentType
	switch {
	case strings.HasPrefix(trimmed, "#!"):
		contentType = shellScriptType
	case strings.HasPrefix(trimmed, "#cloud-config"):
		contentType = cloudConfigType
	}
	return []part{{header: textproto.MIMEHeader{"Content-Type": {contentType}}, body: []byte(custom)}}, nil
}

func mimeParts(document string) ([]part, error) {
	msg, err := mail.ReadMessage(strings.NewReader(document))
	if err != nil {
		return nil, fmt.Errorf("%w: spec.userData: MIME headers: %v", ErrInvalidUserData, err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("%w: spec.userData: Content-Type: %v", ErrInvalidUserData, err)
	}
	if !strings.HasPrefix(mediaType, "multipart/") {
		body, err := io.ReadAll(msg.Body)
		if err != nil {
			return nil, fmt.Errorf("%w: spec.userData: %v", ErrInvalidUserData, err)
		}
		header := textproto.MIMEHeader{"Content-Type": {msg.Header.Get("Content-Type")}}
		if cte := msg.Header.Get("Content-Transfer-Encoding"); cte != "" {
			header.Set("Content-Transfer-Encoding", cte)
		}
		return []part{{header: header, body: body}}, nil
	}
	boundary := params["boundary"]
	if boundary == "" {
		return nil, fmt.Errorf("%w: spec.userData: multipart Content-Type has no boundary", ErrInvalidUserData)
	}
	reader := multipart.NewReader(msg.Body, boundary)
	var parts []part
	for {
		p, err := reader.NextRawPart()
		if errors.Is(err, io.EOF) {
			return parts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: spec.userData: MIME part %d: %v", ErrInvalidUserData, len(parts)+1, err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("%w: spec.userData: MIME part %d: %v", ErrInvalidUserData, len(parts)+1, err)
		}
		// Keep only the headers that describe the content; the boundary is
		// ours now.
		header := textproto.MIMEHeader{}
		for _, key := range []string{"Content-Type", "Content-Transfer-Encoding", "Content-Disposition"} {
			if v := p.Header.Get(key); v != "" {
				header.Set(key, v)
			}
		}
		if header.Get("Content-Type") == "" {
			header.Set("Content-Type", "text/plain")
		}
		parts = append(parts, part{header: header, body: body})
	}
}

// writeMultipart writes a multipart/mixed document whose boundary is derived
// from the content, so the same parts always give the same bytes.
func writeMultipart(parts []part) ([]byte, error) {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p.body)
	}
	boundary := "MILLWRIGHT-" + hex.EncodeToString(h.Sum(nil))[:24]

	var out bytes.Buffer
	out.WriteString("MIME-Version: 1.0\r\n")
	out.WriteString(`Content-Type: multipart/mixed; boundary="` + boundary + "\"\r\n\r\n")
	writer := multipart.NewWriter(&out)
	if err := writer.SetBoundary(boundary); err != nil {
		return nil, fmt.Errorf("userData: MIME boundary: %w", err)
	}
	for i, p := range parts {
		w, err := writer.CreatePart(p.header)
		if err != nil {
			return nil, fmt.Errorf("userData: MIME part %d: %w", i+1, err)
		}
		if _, err := w.Write(p.body); err != nil {
			return nil, fmt.Errorf("userData: MIME part %d: %w", i+1, err)
		}
	}
	if err := writer.Close(); err != nil {
		return nil, fmt.Errorf("userData: closing MIME document: %w", err)
	}
	return out.Bytes(), nil
}

// Package nodeadm owns reading the AL2023 node bootstrap configuration out of
// EC2 userData, the way nodeadm on a real node does: a MIME multi-part
// document (or a bare YAML document) carrying one or more
// `node.eks.aws/v1alpha1` NodeConfig objects, merged in order. The emulator
// uses it to register Nodes with the labels, taints and max pods the product's
// userData asks for, so that userData is exercised end to end.
//
// It parses; it does not bootstrap anything and it does not build userData.
package nodeadm

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// ContentType is the MIME type of a NodeConfig part.
const ContentType = "application/node.eks.aws"

// ErrNoNodeConfig means the userData holds no NodeConfig (e.g. only a shell
// script); a node booted from it joins with no extra labels or taints.
var ErrNoNodeConfig = errors.New("userData contains no node.eks.aws NodeConfig")

// IsNoNodeConfig reports whether err is ErrNoNodeConfig.
func IsNoNodeConfig(err error) bool { return errors.Is(err, ErrNoNodeConfig) }

// NodeConfig is the merged node.eks.aws NodeConfig spec (the fields the
// emulator reads; unknown fields are ignored as nodeadm's strict mode would
// not be, because the emulator is not the place to police them).
type NodeConfig struct {
	Cluster ClusterDetails `json:"cluster"`
	Kubelet KubeletOptions `json:"kubelet"`
}

// ClusterDetails is spec.cluster.
type ClusterDetails struct {
	Name              string `json:"name"`
	APIServerEndpoint string `json:"apiServerEndpoint"`
	// CertificateAuthority is the PEM bundle (base64 in YAML).
	CertificateAuthority []byte `json:"certificateAuthority"`
	CIDR                 string `json:"cidr"`
}

// KubeletOptions is spec.kubelet: a KubeletConfiguration fragment and
// command-line flags.
type KubeletOptions struct {
	Config map[string]any `json:"config"`
	Flags  []string       `json:"flags"`
}

type document struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Spec       NodeConfig `json:"spec"`
}

// DecodeUserData undoes the base64 EC2 applies to userData.
func DecodeUserData(encoded string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return nil, fmt.Errorf("userData is not base64: %w", err)
	}
	return raw, nil
}

// Parse reads userData (already base64-decoded) and merges every NodeConfig
// in it: scalar fields of later documents win, flags accumulate, kubelet
// config keys of later documents override earlier ones.
func Parse(userData []byte) (*NodeConfig, error) {
	docs, err := nodeConfigDocuments(userData)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, ErrNoNodeConfig
	}
	merged := &NodeConfig{}
	for i, raw := range docs {
		var doc document
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("NodeConfig document %d: %w", i+1, err)
		}
		if doc.Kind != "NodeConfig" || !strings.HasPrefix(doc.APIVersion, "node.eks.aws/") {
			continue
		}
		merged.merge(doc.Spec)
	}
	if merged.Cluster.isZero() && len(merged.Kubelet.Flags) == 0 && len(merged.Kubelet.Config) == 0 {
		return nil, ErrNoNodeConfig
	}
	return merged, nil
}

// isZero reports an empty spec.cluster (CertificateAuthority is a slice, so
// the struct is not comparable with ==).
func (c ClusterDetails) isZero() bool {
	return c.Name == "" && c.APIServerEndpoint == "" && len(c.CertificateAuthority) == 0 && c.CIDR == ""
}

func (c *NodeConfig) merge(o NodeConfig) {
	if o.Cluster.Name != "" {
		c.Cluster.Name = o.Cluster.Name
	}
	if o.Cluster.APIServerEndpoint != "" {
		c.Cluster.APIServerEndpoint = o.Cluster.APIServerEndpoint
	}
	if len(o.Cluster.CertificateAuthority) > 0 {
		c.Cluster.CertificateAuthority = o.Cluster.CertificateAuthority
	}
	if o.Cluster.CIDR != "" {
		c.Cluster.CIDR = o.Cluster.CIDR
	}
	c.Kubelet.Flags = append(c.Kubelet.Flags, o.Kubelet.Flags...)
	if len(o.Kubelet.Config) > 0 && c.Kubelet.Config == nil {
		c.Kubelet.Config = map[string]any{}
	}
	for k, v := range o.Kubelet.Config {
		c.Kubelet.Config[k] = v
	}
}

// nodeConfigDocuments returns the YAML documents that may be NodeConfigs:
// the NodeConfig parts of a MIME document, or the whole input split on
// document separators when it is not MIME.
func nodeConfigDocuments(userData []byte) ([][]byte, error) {
	trimmed := bytes.TrimLeft(userData, " \t\r\n")
	if !bytes.HasPrefix(bytes.ToLower(trimmed), []byte("mime-version:")) && !bytes.HasPrefix(bytes.ToLower(trimmed), []byte("content-type:")) {
		if bytes.HasPrefix(trimmed, []byte("#!")) {
			return nil, nil // a shell script, no NodeConfig
		}
		return splitYAML(trimmed), nil
	}
	msg, err := mail.ReadMessage(bytes.NewReader(trimmed))
	if err != nil {
		return nil, fmt.Errorf("userData MIME headers: %w", err)
	}
	var docs [][]byte
	if err := collectParts(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body, &docs); err != nil {
		return nil, err
	}
	return docs, nil
}

func collectParts(contentType, transferEncoding string, body io.Reader, docs *[][]byte) error {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("userData Content-Type %q: %w", contentType, err)
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		boundary := params["boundary"]
		if boundary == "" {
			return fmt.Errorf("userData Content-Type %q has no boundary", contentType)
		}
		mr := multipart.NewReader(body, boundary)
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("userData MIME part: %w", err)
			}
			if err := collectParts(part.Header.Get("Content-Type"), part.Header.Get("Content-Transfer-Encoding"), part, docs); err != nil {
				return err
			}
		}
	}
	if mediaType != ContentType {
		return nil // shell scripts, cloud-config: not ours
	}
	content, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("userData %s part: %w", ContentType, err)
	}
	if strings.EqualFold(strings.TrimSpace(transferEncoding), "base64") {
		if content, err = base64.StdEncoding.DecodeString(string(bytes.Join(bytes.Fields(content), nil))); err != nil {
			return fmt.Errorf("userData %s part is not valid base64: %w", ContentType, err)
		}
	}
	*docs = append(*docs, splitYAML(content)...)
	return nil
}

func splitYAML(content []byte) [][]byte {
	var docs [][]byte
	var cur []string
	flush := func() {
		if doc := strings.TrimSpace(strings.Join(cur, "\n")); doc != "" {
			docs = append(docs, []byte(doc))
		}
		cur = nil
	}
	for _, line := range strings.Split(string(content), "\n") {
		if strings.TrimRight(line, " \r") == "---" {
			flush()
			continue
		}
		cur = append(cur, strings.TrimRight(line, "\r"))
	}
	flush()
	return docs
}

// flagValues returns the values of every `--name=value` (or `--name value`)
// kubelet flag, in order. Each list element is one kubelet argument, as
// nodeadm passes them: values are not split on spaces.
func (c *NodeConfig) flagValues(name string) []string {
	var out []string
	args := c.Kubelet.Flags
	for i := 0; i < len(args); i++ {
		arg := strings.TrimSpace(args[i])
		if v, ok := strings.CutPrefix(arg, "--"+name+"="); ok {
			out = append(out, v)
		} else if arg == "--"+name && i+1 < len(args) {
			out = append(out, strings.TrimSpace(args[i+1]))
			i++
		}
	}
	return out
}

// Labels returns the labels of the `--node-labels` flags. An invalid label
// is an error naming it, as kubelet would refuse to start.
func (c *NodeConfig) Labels() (map[string]string, error) {
	labels := map[string]string{}
	for _, v := range c.flagValues("node-labels") {
		for _, kv := range strings.Split(v, ",") {
			if kv = strings.TrimSpace(kv); kv == "" {
				continue
			}
			k, val, _ := strings.Cut(kv, "=")
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return nil, fmt.Errorf("--node-labels: label key %q: %s", k, strings.Join(errs, "; "))
			}
			if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
				return nil, fmt.Errorf("--node-labels: label %q value %q: %s", k, val, strings.Join(errs, "; "))
			}
			labels[k] = val
		}
	}
	return labels, nil
}

// Taints returns the taints of the `--register-with-taints` flags and of
// kubelet config `registerWithTaints`, without duplicates.
func (c *NodeConfig) Taints() ([]corev1.Taint, error) {
	var taints []corev1.Taint
	seen := map[string]bool{}
	add := func(t corev1.Taint) error {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return fmt.Errorf("taint key %q: %s", t.Key, strings.Join(errs, "; "))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Effect)
		}
		id := t.Key + "/" + string(t.Effect)
		if !seen[id] {
			seen[id] = true
			taints = append(taints, t)
		}
		return nil
	}
	for _, v := range c.flagValues("register-with-taints") {
		for _, spec := range strings.Split(v, ",") {
			if spec = strings.TrimSpace(spec); spec == "" {
				continue
			}
			kv, effect, ok := strings.Cut(spec, ":")
			if !ok {
				return nil, fmt.Errorf("--register-with-taints: %q has no effect (want key[=value]:Effect)", spec)
			}
			k, val, _ := strings.Cut(kv, "=")
			if err := add(corev1.Taint{Key: k, Value: val, Effect: corev1.TaintEffect(effect)}); err != nil {
				return nil, fmt.Errorf("--register-with-taints: %w", err)
			}
		}
	}
	if raw, ok := c.Kubelet.Config["registerWithTaints"]; ok {
		list, ok := raw.([]any)
		if !ok {
			return nil, fmt.Errorf("kubelet config registerWithTaints: want a list, got %T", raw)
		}
		for i, item := range list {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("kubelet config registerWithTaints[%d]: want an object, got %T", i, item)
			}
			k, _ := m["key"].(string)
			v, _ := m["value"].(string)
			e, _ := m["effect"].(string)
			if err := add(corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(e)}); err != nil {
				return nil, fmt.Errorf("kubelet config registerWithTaints[%d]: %w", i, err)
			}
		}
	}
	return taints, nil
}

// MaxPods returns the kubelet's max pods from kubelet config `maxPods` or the
// `--max-pods` flag (the flag wins, as on a real kubelet); ok is false when
// neither is set.
func (c *NodeConfig) MaxPods() (int, bool, error) {
	if vals := c.flagValues("max-pods"); len(vals) > 0 {
		n, err := strconv.Atoi(vals[len(vals)-1])
		if err != nil || n <= 0 {
			return 0, false, fmt.Errorf("--max-pods=%s is not a positive integer", vals[len(vals)-1])
		}
		return n, true, nil
	}
	raw, ok := c.Kubelet.Config["maxPods"]
	if !ok {
		return 0, false, nil
	}
	// sigs.k8s.io/yaml decodes numbers into float64.
	f, ok := raw.(float64)
	if !ok || f <= 0 || f != float64(int(f)) {
		return 0, false, fmt.Errorf("kubelet config maxPods %v is not a positive integer", raw)
	}
	return int(f), true, nil
}

// Reserved and eviction settings of the kubelet configuration, as the
// kubelet reads them.
type KubeletReservations struct {
	PodsPerCore    *int32
	KubeReserved   map[string]string
	SystemReserved map[string]string
	EvictionHard   map[string]string
	EvictionSoft   map[string]string
}

// Reservations returns kubelet config podsPerCore, kubeReserved,
// systemReserved, evictionHard and evictionSoft; a malformed one is an
// error naming it, as kubelet would refuse to start.
func (c *NodeConfig) Reservations() (KubeletReservations, error) {
	var r KubeletReservations
	if raw, ok := c.Kubelet.Config["podsPerCore"]; ok {
		f, ok := raw.(float64)
		if !ok || f < 0 || f != float64(int32(f)) {
			return r, fmt.Errorf("kubelet config podsPerCore %v is not a non-negative integer", raw)
		}
		n := int32(f)
		r.PodsPerCore = &n
	}
	for _, m := range []struct {
		key string
		dst *map[string]string
	}{{"kubeReserved", &r.KubeReserved}, {"systemReserved", &r.SystemReserved}, {"evictionHard", &r.EvictionHard}, {"evictionSoft", &r.EvictionSoft}} {
		raw, ok := c.Kubelet.Config[m.key]
		if !ok {
			continue
		}
		obj, ok := raw.(map[string]any)
		if !ok {
			return r, fmt.Errorf("kubelet config %s: want a map of strings, got %T", m.key, raw)
		}
		out := map[string]string{}
		for k, v := range obj {
			s, ok := v.(string)
			if !ok {
				return r, fmt.Errorf("kubelet config %s[%s]: want a string, got %T", m.key, k, v)
			}
			out[k] = s
		}
		*m.dst = out
	}
	return r, nil
}

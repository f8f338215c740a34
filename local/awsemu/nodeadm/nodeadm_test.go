package nodeadm

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// nodeConfig builds a NodeConfig YAML document with the given kubelet flags
// and config lines.
func nodeConfig(flags []string, config string) string {
	var b strings.Builder
	b.WriteString("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n")
	b.WriteString("  cluster:\n    name: demo\n    apiServerEndpoint: https://10.0.0.1:6443\n")
	b.WriteString("    certificateAuthority: " + base64.StdEncoding.EncodeToString([]byte("CA PEM")) + "\n    cidr: 10.96.0.0/12\n")
	b.WriteString("  kubelet:\n")
	if config != "" {
		b.WriteString("    config:\n" + config)
	}
	if len(flags) > 0 {
		b.WriteString("    flags:\n")
		for _, f := range flags {
			b.WriteString("    - " + f + "\n")
		}
	}
	return b.String()
}

// multipartDocument wraps parts (content type, body) in a multipart/mixed document.
func multipartDocument(parts ...[2]string) string {
	var b strings.Builder
	b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n")
	for _, p := range parts {
		b.WriteString("--//\nContent-Type: " + p[0] + "\n\n" + p[1] + "\n")
	}
	b.WriteString("--//--\n")
	return b.String()
}

func TestParse(t *testing.T) {
	tests := []struct {
		name       string
		userData   string
		wantLabels map[string]string
		wantTaints []corev1.Taint
		wantPods   int
		wantErr    string
	}{
		{
			name:       "plain YAML",
			userData:   nodeConfig([]string{"--node-labels=a=1,b=2", "--register-with-taints=t=v:NoSchedule"}, ""),
			wantLabels: map[string]string{"a": "1", "b": "2"},
			wantTaints: []corev1.Taint{{Key: "t", Value: "v", Effect: corev1.TaintEffectNoSchedule}},
		},
		{
			name: "MIME with a shell script part first and two NodeConfigs merged",
			userData: multipartDocument(
				[2]string{"text/x-shellscript; charset=\"us-ascii\"", "#!/bin/bash\necho hi"},
				[2]string{ContentType, nodeConfig([]string{"--node-labels=custom=yes"}, "      maxPods: 17\n")},
				[2]string{ContentType, "---\n" + nodeConfig([]string{"--node-labels=millwright.dev/nodepool=default", "--register-with-taints=millwright.dev/unregistered=true:NoExecute,gpu:NoSchedule"}, "")},
			),
			wantLabels: map[string]string{"custom": "yes", "millwright.dev/nodepool": "default"},
			wantTaints: []corev1.Taint{
				{Key: "millwright.dev/unregistered", Value: "true", Effect: corev1.TaintEffectNoExecute},
				{Key: "gpu", Effect: corev1.TaintEffectNoSchedule},
			},
			wantPods: 17,
		},
		{
			name: "kubelet config taints and max-pods flag",
			userData: nodeConfig([]string{"--max-pods=58"},
				"      maxPods: 17\n      registerWithTaints:\n      - key: k\n        value: v\n        effect: NoExecute\n"),
			wantLabels: map[string]string{},
			wantTaints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute}},
			wantPods:   58,
		},
		{
			name:       "base64 transfer-encoded part",
			userData:   "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: application/node.eks.aws\nContent-Transfer-Encoding: base64\n\n" + base64.StdEncoding.EncodeToString([]byte(nodeConfig([]string{"--node-labels=enc=yes"}, ""))) + "\n--b--\n",
			wantLabels: map[string]string{"enc": "yes"},
		},
		{name: "shell script only", userData: "#!/bin/bash\n/etc/eks/bootstrap.sh demo\n", wantErr: ErrNoNodeConfig.Error()},
		{name: "invalid label key", userData: nodeConfig([]string{"--node-labels=Bad Key=x"}, ""), wantErr: "label key"},
		{name: "taint without effect", userData: nodeConfig([]string{"--register-with-taints=a=b"}, ""), wantErr: "has no effect"},
		{name: "unknown taint effect", userData: nodeConfig([]string{"--register-with-taints=a=b:Sometimes"}, ""), wantErr: "effect"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.userData))
			if err == nil {
				var labels map[string]string
				var taints []corev1.Taint
				if labels, err = cfg.Labels(); err == nil {
					taints, err = cfg.Taints()
					if err == nil {
						if !reflect.DeepEqual(labels, tc.wantLabels) {
							t.Errorf("labels %v, want %v", labels, tc.wantLabels)
						}
						if !reflect.DeepEqual(taints, tc.wantTaints) {
							t.Errorf("taints %v, want %v", taints, tc.wantTaints)
						}
						pods, ok, podsErr := cfg.MaxPods()
						if podsErr != nil || (tc.wantPods > 0) != ok || pods != tc.wantPods {
							t.Errorf("max pods %d %v %v, want %d", pods, ok, podsErr, tc.wantPods)
						}
						if cfg.Cluster.Name != "demo" || string(cfg.Cluster.CertificateAuthority) != "CA PEM" || cfg.Cluster.CIDR != "10.96.0.0/12" {
							t.Errorf("cluster %+v", cfg.Cluster)
						}
					}
				}
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestDecodeUserData(t *testing.T) {
	raw, err := DecodeUserData(base64.StdEncoding.EncodeToString([]byte("hello")) + "\n")
	if err != nil || string(raw) != "hello" {
		t.Errorf("%q %v", raw, err)
	}
	if _, err := DecodeUserData("not base64!"); err == nil {
		t.Error("accepted invalid base64")
	}
	if _, err := Parse([]byte("#!/bin/bash\n")); !IsNoNodeConfig(err) {
		t.Errorf("shell script: %v", err)
	}
}

package nodeadm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"regexp"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// The other AMI families' bootstrap formats, each read into the same
// NodeConfig (cluster details plus kubelet flags and config) so the
// emulator registers every family's Node the same way:
//   - AL2: /etc/eks/bootstrap.sh in a shell-script part (the arguments
//     after the cluster name, --kubelet-extra-args split into flags);
//   - Bottlerocket: TOML settings ([settings.kubernetes]: node-labels,
//     node-taints, max-pods, cluster-name, api-server);
//   - Windows: the EKS bootstrap PowerShell (Start-EKSBootstrap.ps1 with
//     -EKSClusterName, -APIServerEndpoint and -KubeletExtraArgs) in a
//     <powershell> block.

// ParseBootstrapScript reads the AL2 userData: the last bootstrap.sh call
// in its shell-script parts (or in the whole input when it is a script).
func ParseBootstrapScript(userData []byte) (*NodeConfig, error) {
	scripts, err := shellScripts(userData)
	if err != nil {
		return nil, err
	}
	var call string
	for _, s := range scripts {
		if c := bootstrapCall(s); c != "" {
			call = c
		}
	}
	if call == "" {
		return nil, ErrNoNodeConfig
	}
	words, err := shellWords(call)
	if err != nil {
		return nil, fmt.Errorf("bootstrap.sh arguments: %w", err)
	}
	cfg := &NodeConfig{}
	for i := 1; i < len(words); i++ {
		w := words[i]
		next := func() string {
			if i+1 < len(words) {
				i++
				return words[i]
			}
			return ""
		}
		switch {
		case !strings.HasPrefix(w, "--") && cfg.Cluster.Name == "":
			cfg.Cluster.Name = w
		case w == "--apiserver-endpoint":
			cfg.Cluster.APIServerEndpoint = next()
		case w == "--b64-cluster-ca":
			cfg.Cluster.CertificateAuthority = []byte(next())
		case w == "--kubelet-extra-args":
			flags, err := shellWords(next())
			if err != nil {
				return nil, fmt.Errorf("bootstrap.sh --kubelet-extra-args: %w", err)
			}
			cfg.Kubelet.Flags = append(cfg.Kubelet.Flags, flags...)
		case w == "--dns-cluster-ip" || w == "--use-max-pods" || w == "--ip-family" || w == "--local-disks" || w == "--container-runtime":
			next()
		}
	}
	return cfg, nil
}

// bootstrapCall is the text of the last `/etc/eks/bootstrap.sh …` command
// in script, its continuation lines joined.
func bootstrapCall(script string) string {
	joined := strings.ReplaceAll(strings.ReplaceAll(script, "\\\r\n", " "), "\\\n", " ")
	var call string
	for _, line := range strings.Split(joined, "\n") {
		if i := strings.Index(line, "/etc/eks/bootstrap.sh"); i >= 0 && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			call = line[i:]
		}
	}
	return call
}

// shellScripts returns the text/x-shellscript parts of a MIME document, or
// the input itself when it is not MIME.
func shellScripts(userData []byte) ([]string, error) {
	trimmed := bytes.TrimLeft(userData, " \t\r\n")
	lower := bytes.ToLower(trimmed)
	if !bytes.HasPrefix(lower, []byte("mime-version:")) && !bytes.HasPrefix(lower, []byte("content-type:")) {
		return []string{string(trimmed)}, nil
	}
	msg, err := mail.ReadMessage(bytes.NewReader(trimmed))
	if err != nil {
		return nil, fmt.Errorf("userData MIME headers: %w", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("userData Content-Type: %w", err)
	}
	if !strings.HasPrefix(mediaType, "multipart/") {
		body, err := io.ReadAll(msg.Body)
		return []string{string(body)}, err
	}
	var out []string
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("userData MIME part: %w", err)
		}
		if t, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type")); t != "text/x-shellscript" {
			continue
		}
		body, err := io.ReadAll(part)
		if err != nil {
			return nil, fmt.Errorf("userData MIME part: %w", err)
		}
		out = append(out, string(body))
	}
}

// shellWords splits s as a POSIX shell would split a simple command:
// whitespace separates words; single quotes keep everything literally;
// double quotes keep whitespace and honour \" and \\.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// ParseBottlerocket reads Bottlerocket's TOML settings.
func ParseBottlerocket(userData []byte) (*NodeConfig, error) {
	var doc struct {
		Settings struct {
			Kubernetes struct {
				ClusterName        string              `toml:"cluster-name"`
				APIServer          string              `toml:"api-server"`
				ClusterCertificate string              `toml:"cluster-certificate"`
				MaxPods            *int64              `toml:"max-pods"`
				NodeLabels         map[string]string   `toml:"node-labels"`
				NodeTaints         map[string][]string `toml:"node-taints"`
			} `toml:"kubernetes"`
		} `toml:"settings"`
	}
	if _, err := toml.Decode(string(userData), &doc); err != nil {
		return nil, fmt.Errorf("Bottlerocket settings TOML: %w", err)
	}
	k := doc.Settings.Kubernetes
	if k.ClusterName == "" && k.APIServer == "" {
		return nil, ErrNoNodeConfig
	}
	cfg := &NodeConfig{Cluster: ClusterDetails{Name: k.ClusterName, APIServerEndpoint: k.APIServer, CertificateAuthority: []byte(k.ClusterCertificate)}}
	if len(k.NodeLabels) > 0 {
		keys := sortedKeys(k.NodeLabels)
		pairs := make([]string, len(keys))
		for i, key := range keys {
			pairs[i] = key + "=" + k.NodeLabels[key]
		}
		cfg.Kubelet.Flags = append(cfg.Kubelet.Flags, "--node-labels="+strings.Join(pairs, ","))
	}
	var taints []string
	for _, key := range sortedKeys(k.NodeTaints) {
		for _, valueEffect := range k.NodeTaints[key] {
			value, effect, ok := strings.Cut(valueEffect, ":")
			if !ok {
				return nil, fmt.Errorf("settings.kubernetes.node-taints.%q: %q is not value:Effect", key, valueEffect)
			}
			spec := key
			if value != "" {
				spec += "=" + value
			}
			taints = append(taints, spec+":"+effect)
		}
	}
	if len(taints) > 0 {
		cfg.Kubelet.Flags = append(cfg.Kubelet.Flags, "--register-with-taints="+strings.Join(taints, ","))
	}
	if k.MaxPods != nil {
		cfg.Kubelet.Config = map[string]any{"maxPods": float64(*k.MaxPods)}
	}
	return cfg, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var (
	powershellBlock = regexp.MustCompile(`(?s)<powershell>(.*?)</powershell>`)
	psArgument      = regexp.MustCompile(`-(EKSClusterName|APIServerEndpoint|Base64ClusterCA|KubeletExtraArgs|DNSClusterIP)\s+'((?:[^']|'')*)'`)
)

// ParseWindows reads the Windows userData: the last Start-EKSBootstrap.ps1
// call in its <powershell> blocks.
func ParseWindows(userData []byte) (*NodeConfig, error) {
	var call string
	for _, block := range powershellBlock.FindAllSubmatch(userData, -1) {
		for _, line := range strings.Split(string(block[1]), "\n") {
			if strings.Contains(line, "$EKSBootstrapScriptFile") && strings.Contains(line, "-EKSClusterName") {
				call = line
			}
		}
	}
	if call == "" {
		return nil, ErrNoNodeConfig
	}
	cfg := &NodeConfig{}
	for _, m := range psArgument.FindAllStringSubmatch(call, -1) {
		value := strings.ReplaceAll(m[2], "''", "'")
		switch m[1] {
		case "EKSClusterName":
			cfg.Cluster.Name = value
		case "APIServerEndpoint":
			cfg.Cluster.APIServerEndpoint = value
		case "Base64ClusterCA":
			cfg.Cluster.CertificateAuthority = []byte(value)
		case "KubeletExtraArgs":
			flags, err := shellWords(value)
			if err != nil {
				return nil, fmt.Errorf("Start-EKSBootstrap.ps1 -KubeletExtraArgs: %w", err)
			}
			cfg.Kubelet.Flags = append(cfg.Kubelet.Flags, flags...)
		}
	}
	return cfg, nil
}

package userdata

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
)

// Windows is the userData of an EKS-optimized Windows node: one
// <powershell> block that runs the class's own PowerShell first, then the
// EKS bootstrap script (Start-EKSBootstrap.ps1) with the cluster, the
// kubelet flags and the DNS address, as Karpenter writes it.
type Windows struct{ Bootstrap }

var powershellTags = regexp.MustCompile(`(?i)</?powershell>`)

// Build returns the raw userData.
func (u Windows) Build() ([]byte, error) {
	if err := u.Cluster.validate(); err != nil {
		return nil, err
	}
	if u.RAID0 {
		return nil, fmt.Errorf("%w: spec.instanceStorePolicy: RAID0 is not supported by the Windows AMI families", ErrInvalidUserData)
	}
	var b strings.Builder
	b.WriteString("<powershell>\n")
	// The class's script may carry its own <powershell> tags; its body
	// goes inside ours.
	if custom := strings.TrimSpace(powershellTags.ReplaceAllString(u.Custom, "")); custom != "" {
		b.WriteString(custom + "\n")
	}
	b.WriteString(`[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"` + "\n")
	fmt.Fprintf(&b, "& $EKSBootstrapScriptFile -EKSClusterName %s -APIServerEndpoint %s -Base64ClusterCA %s",
		singleQuoted(u.Cluster.Name, true), singleQuoted(u.Cluster.APIServerEndpoint, true),
		singleQuoted(base64.StdEncoding.EncodeToString(u.Cluster.CertificateAuthority), true))
	if args := u.kubeletExtraArgs(); len(args) > 0 {
		fmt.Fprintf(&b, " -KubeletExtraArgs %s", singleQuoted(strings.Join(args, " "), true))
	}
	if len(u.ClusterDNS) > 0 {
		fmt.Fprintf(&b, " -DNSClusterIP %s", singleQuoted(u.ClusterDNS[0], true))
	}
	b.WriteString("\n</powershell>")
	return []byte(b.String()), nil
}

// BuildBase64 returns the userData as EC2 takes it.
func (u Windows) BuildBase64() (string, error) { return base64Of(u.Build()) }

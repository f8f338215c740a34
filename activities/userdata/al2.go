package userdata

import (
	"encoding/base64"
	"fmt"
	"net/textproto"
	"strings"
)

// AL2 is the userData of an Amazon Linux 2 node: a MIME multi-part
// document whose last part runs /etc/eks/bootstrap.sh with the cluster,
// DNS, max pods, kubelet flags and, for instanceStorePolicy RAID0,
// --local-disks raid0. The class's userData parts come first (a bare
// script becomes a shell-script part), as Karpenter merges them.
type AL2 struct{ Bootstrap }

// Build returns the raw userData.
func (u AL2) Build() ([]byte, error) {
	if err := u.Cluster.validate(); err != nil {
		return nil, err
	}
	parts, err := scriptParts(u.Custom)
	if err != nil {
		return nil, err
	}
	parts = append(parts, part{
		header: textproto.MIMEHeader{"Content-Type": {`text/x-shellscript; charset="us-ascii"`}},
		body:   []byte(u.script()),
	})
	return writeMultipart(parts)
}

// BuildBase64 returns the userData as EC2 takes it.
func (u AL2) BuildBase64() (string, error) { return base64Of(u.Build()) }

func (u AL2) script() string {
	var b strings.Builder
	b.WriteString("#!/bin/bash -xe\n")
	b.WriteString("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	// bootstrap.sh takes its options as separate words, not --name=value.
	fmt.Fprintf(&b, "/etc/eks/bootstrap.sh %s --apiserver-endpoint %s --b64-cluster-ca %s",
		singleQuoted(u.Cluster.Name, false), singleQuoted(u.Cluster.APIServerEndpoint, false),
		singleQuoted(base64.StdEncoding.EncodeToString(u.Cluster.CertificateAuthority), false))
	if len(u.ClusterDNS) > 0 {
		fmt.Fprintf(&b, " \\\n--dns-cluster-ip %s", singleQuoted(u.ClusterDNS[0], false))
	}
	if u.MaxPods > 0 {
		b.WriteString(" \\\n--use-max-pods false")
	}
	if args := u.kubeletExtraArgs(); len(args) > 0 {
		fmt.Fprintf(&b, " \\\n--kubelet-extra-args %s", singleQuoted(strings.Join(args, " "), false))
	}
	if u.RAID0 {
		b.WriteString(" \\\n--local-disks raid0")
	}
	b.WriteString("\n")
	return b.String()
}

// scriptParts splits AL2 custom userData into MIME parts: a MIME document's
// parts, or the whole text as one shell script.
func scriptParts(custom string) ([]part, error) {
	trimmed := strings.TrimLeft(custom, " \t\r\n")
	if trimmed == "" {
		return nil, nil
	}
	lower := strings.ToLower(trimmed)
	if strings.HasPrefix(lower, "mime-version:") || strings.HasPrefix(lower, "content-type:") {
		return mimeParts(trimmed)
	}
	return []part{{header: textproto.MIMEHeader{"Content-Type": {`text/x-shellscript; charset="us-ascii"`}}, body: []byte(custom)}}, nil
}

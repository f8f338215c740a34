package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestClusterCA(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, []byte("from file"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		tls     rest.TLSClientConfig
		want    string
		wantErr string
	}{
		{name: "inline CA wins", tls: rest.TLSClientConfig{CAData: []byte("inline"), CAFile: caFile}, want: "inline"},
		{name: "CA named by file (kwokctl, kubeadm kubeconfigs)", tls: rest.TLSClientConfig{CAFile: caFile}, want: "from file"},
		{name: "no CA at all", tls: rest.TLSClientConfig{}, want: ""},
		{name: "missing file names it", tls: rest.TLSClientConfig{CAFile: filepath.Join(dir, "nope")}, wantErr: "nope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := clusterCA(&rest.Config{TLSClientConfig: tc.tls})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("clusterCA = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

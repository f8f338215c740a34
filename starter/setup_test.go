package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"

	"github.com/millwright/millwright/local/temporal"
	"github.com/millwright/millwright/local/temporal/temporaltesting"
	"github.com/millwright/millwright/workflows"
)

// TestSetupRegistersSearchAttributesIdempotently runs `starter setup` twice
// against a real (embedded) server that starts without Millwright's
// attributes, once on its existing namespace and once creating a namespace.
func TestSetupRegistersSearchAttributesIdempotently(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := temporaltesting.Start(ctx, temporal.Options{Namespace: "existing"})
	if err != nil {
		t.Fatalf("starting embedded temporal: %v", err)
	}
	defer env.Close()
	for _, name := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY", "TEMPORAL_TLS_CA", "TEMPORAL_TLS_SERVER_NAME"} {
		t.Setenv(name, "")
	}

	tests := []struct {
		name          string
		namespace     string
		extraArgs     []string
		wantFirstRun  []string
		wantSecondRun []string
	}{
		{
			name:          "existing namespace",
			namespace:     "existing",
			wantFirstRun:  []string{"MillwrightPhase (Keyword): added", "ready for Millwright"},
			wantSecondRun: []string{"MillwrightPhase (Keyword): already registered"},
		},
		{
			name:          "namespace created by setup",
			namespace:     "created-by-setup",
			extraArgs:     []string{"--create-namespace", "--retention", "48h"},
			wantFirstRun:  []string{"namespace created-by-setup: registered (retention 48h0m0s)", "MillwrightZone (Keyword): added"},
			wantSecondRun: []string{"namespace created-by-setup: already exists", "MillwrightZone (Keyword): already registered"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"setup", "--address", env.Server.FrontendAddr(), "--namespace", tt.namespace}, tt.extraArgs...)
			for run, wants := range [][]string{tt.wantFirstRun, tt.wantSecondRun} {
				out := runStarter(ctx, t, args...)
				for _, want := range wants {
					if !strings.Contains(out, want) {
						t.Errorf("run %d: output lacks %q:\n%s", run+1, want, out)
					}
				}
			}

			listed, err := env.Client.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: tt.namespace})
			if err != nil {
				t.Fatal(err)
			}
			for name, wantType := range workflows.SearchAttributeTypes() {
				if got, ok := listed.GetCustomAttributes()[name]; !ok || got != wantType {
					t.Errorf("%s on %s: listed=%v type=%s, want %s", name, tt.namespace, ok, got, wantType)
				}
			}
		})
	}
}

func TestSetupRejectsIncompleteMTLSFlags(t *testing.T) {
	_, err := runStarterErr(context.Background(), "setup", "--address", "127.0.0.1:1", "--tls-cert", "client.pem")
	if err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Errorf("error = %v, want one naming --tls-key", err)
	}
}

func runStarter(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, err := runStarterErr(ctx, args...)
	if err != nil {
		t.Fatalf("starter %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func runStarterErr(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

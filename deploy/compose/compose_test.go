package compose

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

const repoRoot = "../.."

// userEnv is what a user exports before `docker compose up`.
func userEnv() map[string]string {
	return map[string]string{
		"HOME":                    "/home/ops",
		"MILLWRIGHT_CLUSTER_NAME": "prod",
		"AWS_REGION":              "us-west-2",
		"AWS_ACCESS_KEY_ID":       "AKIAEXAMPLE",
		"AWS_SECRET_ACCESS_KEY":   "secret",
		"AWS_SESSION_TOKEN":       "session",
		"MILLWRIGHT_KUBECONFIG":   "/home/ops/millwright.kubeconfig",
	}
}

func load(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	project, err := Load(context.Background(), repoRoot, env)
	if err != nil {
		t.Fatal(err)
	}
	return project
}

func service(t *testing.T, project *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := project.GetService(name)
	if err != nil {
		t.Fatalf("service %s: %v", name, err)
	}
	return s
}

func envValue(s types.ServiceConfig, name string) string {
	if v, ok := s.Environment[name]; ok && v != nil {
		return *v
	}
	return ""
}

// workerEnvironment is every variable the worker binary reads
// (worker/main.go and worker/connect).
var workerEnvironment = []string{
	"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_CERT",
	"TEMPORAL_TLS_KEY", "TEMPORAL_TLS_CA", "TEMPORAL_TLS_SERVER_NAME", "MILLWRIGHT_TASK_QUEUE",
	"MILLWRIGHT_CLUSTER_NAME", "KUBECONFIG", "MILLWRIGHT_CLUSTER_ENDPOINT", "AWS_REGION", "AWS_DEFAULT_REGION",
	"AWS_ENDPOINT_URL", "MILLWRIGHT_PRICING", "MILLWRIGHT_INTERRUPTION_QUEUE", "MILLWRIGHT_LOG_LEVEL",
	"MILLWRIGHT_METRICS_ADDRESS",
	// Read by the AWS SDK's default credential chain.
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
}

// pointsAtTemporal checks address is host:port of the temporal service's
// gRPC port on the compose network.
func pointsAtTemporal(t *testing.T, project *types.Project, who, address string) {
	t.Helper()
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		t.Errorf("%s: TEMPORAL_ADDRESS %q: %v", who, address, err)
		return
	}
	temporal := service(t, project, host)
	if !slices.ContainsFunc(temporal.Ports, func(p types.ServicePortConfig) bool { return p.Target == 7233 }) || port != "7233" {
		t.Errorf("%s: TEMPORAL_ADDRESS %q is not the %s service's frontend port 7233", who, address, host)
	}
}

func TestStackHasEveryServiceTheWorkerNeeds(t *testing.T) {
	project := load(t, userEnv())
	want := []string{"postgresql", "temporal-schema", "temporal", "temporal-ui", "millwright-setup", "millwright-worker"}
	if got := project.ServiceNames(); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("services = %v, want %v", got, want)
	}
	dependencies := map[string]map[string]string{
		"temporal-schema":   {"postgresql": types.ServiceConditionHealthy},
		"temporal":          {"temporal-schema": types.ServiceConditionCompletedSuccessfully},
		"temporal-ui":       {"temporal": types.ServiceConditionHealthy},
		"millwright-setup":  {"temporal": types.ServiceConditionHealthy},
		"millwright-worker": {"temporal": types.ServiceConditionHealthy, "millwright-setup": types.ServiceConditionCompletedSuccessfully},
	}
	for name, wantDeps := range dependencies {
		s := service(t, project, name)
		if len(s.DependsOn) != len(wantDeps) {
			t.Errorf("%s depends on %v, want %v", name, s.DependsOn, wantDeps)
		}
		for dep, condition := range wantDeps {
			if got := s.DependsOn[dep].Condition; got != condition {
				t.Errorf("%s depends on %s with condition %q, want %q", name, dep, got, condition)
			}
			if condition == types.ServiceConditionHealthy && service(t, project, dep).HealthCheck == nil {
				t.Errorf("%s waits for %s to be healthy but %s has no healthcheck", name, dep, dep)
			}
		}
	}
	ui := service(t, project, "temporal-ui")
	if !slices.ContainsFunc(ui.Ports, func(p types.ServicePortConfig) bool { return p.Target == 8080 && p.Published == "8080" }) {
		t.Errorf("temporal-ui ports %+v: want 8080:8080", ui.Ports)
	}
	for _, name := range []string{"temporal-ui", "millwright-setup", "millwright-worker"} {
		pointsAtTemporal(t, project, name, envValue(service(t, project, name), "TEMPORAL_ADDRESS"))
	}
	if ns := envValue(service(t, project, "millwright-setup"), "TEMPORAL_NAMESPACE"); ns != envValue(service(t, project, "millwright-worker"), "TEMPORAL_NAMESPACE") || ns != "default" {
		t.Errorf("setup registers namespace %q, the worker uses %q", ns, envValue(service(t, project, "millwright-worker"), "TEMPORAL_NAMESPACE"))
	}
}

func TestImagesArePinned(t *testing.T) {
	project := load(t, userEnv())
	for _, s := range project.Services {
		if s.Build != nil {
			if s.Build.Dockerfile != "Dockerfile" {
				t.Errorf("%s builds from %q, want the repository's Dockerfile", s.Name, s.Build.Dockerfile)
			}
			if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("%s: %v", s.Name, err)
			}
			continue
		}
		_, tag, found := strings.Cut(s.Image[strings.LastIndex(s.Image, "/")+1:], ":")
		if !found || tag == "latest" || !strings.ContainsAny(tag, ".") {
			t.Errorf("%s: image %q is not pinned to a version", s.Name, s.Image)
		}
	}
}

func TestSetupRunsTheStarterFromOurImage(t *testing.T) {
	project := load(t, userEnv())
	setup := service(t, project, "millwright-setup")
	worker := service(t, project, "millwright-worker")
	if setup.Image != worker.Image || setup.Build == nil {
		t.Errorf("setup image %q (build %v) is not the worker's %q", setup.Image, setup.Build, worker.Image)
	}
	dockerfile, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	entrypoint := setup.Entrypoint
	if len(entrypoint) != 1 || !strings.Contains(string(dockerfile), "/out/starter "+filepath.Dir(entrypoint[0])+"/") {
		t.Errorf("setup entrypoint %v is not where the Dockerfile puts the starter", entrypoint)
	}
	if command := []string(setup.Command); len(command) == 0 || command[0] != "setup" || !slices.Contains(command, "--create-namespace") {
		t.Errorf("setup command %v, want setup --create-namespace", command)
	}
}

func TestWorkerIsConfiguredForTheRealClusterAndAWS(t *testing.T) {
	project := load(t, userEnv())
	worker := service(t, project, "millwright-worker")
	for name := range worker.Environment {
		if !slices.Contains(workerEnvironment, name) {
			t.Errorf("worker environment sets %s, which the worker does not read", name)
		}
	}
	want := map[string]string{
		"MILLWRIGHT_CLUSTER_NAME":    "prod",
		"AWS_REGION":                 "us-west-2",
		"AWS_ACCESS_KEY_ID":          "AKIAEXAMPLE",
		"AWS_SECRET_ACCESS_KEY":      "secret",
		"AWS_SESSION_TOKEN":          "session",
		"MILLWRIGHT_LOG_LEVEL":       "info",
		"AWS_ENDPOINT_URL":           "", // real AWS, not the emulator
		"MILLWRIGHT_METRICS_ADDRESS": ":8080",
	}
	for name, value := range want {
		if got := envValue(worker, name); got != value {
			t.Errorf("worker %s = %q, want %q", name, got, value)
		}
	}
	// The metrics port is published, and not on a host port another
	// service (the Temporal UI's 8080) already has.
	if !slices.ContainsFunc(worker.Ports, func(p types.ServicePortConfig) bool { return p.Target == 8080 && p.Published == "8081" }) {
		t.Errorf("worker ports %+v: want the metrics port 8080 published on 8081", worker.Ports)
	}
	published := map[string]string{}
	for _, name := range project.ServiceNames() {
		for _, p := range service(t, project, name).Ports {
			if p.Published == "" {
				continue
			}
			if other, taken := published[p.Published]; taken {
				t.Errorf("host port %s published by both %s and %s", p.Published, other, name)
			}
			published[p.Published] = name
		}
	}
	kubeconfig := envValue(worker, "KUBECONFIG")
	mounted := slices.IndexFunc(worker.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == kubeconfig })
	switch {
	case kubeconfig == "":
		t.Error("worker KUBECONFIG is empty: it would look for an in-cluster config")
	case mounted < 0:
		t.Errorf("KUBECONFIG %s is not a mount of the worker", kubeconfig)
	default:
		volume := worker.Volumes[mounted]
		if volume.Type != types.VolumeTypeBind || !volume.ReadOnly || volume.Source != "/home/ops/millwright.kubeconfig" {
			t.Errorf("kubeconfig mount %+v: want a read-only bind of $MILLWRIGHT_KUBECONFIG", volume)
		}
	}

	// Without MILLWRIGHT_KUBECONFIG the user's default kubeconfig is mounted.
	env := userEnv()
	delete(env, "MILLWRIGHT_KUBECONFIG")
	worker = service(t, load(t, env), "millwright-worker")
	if !slices.ContainsFunc(worker.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Source == "/home/ops/.kube/config" }) {
		t.Errorf("default kubeconfig not mounted: %+v", worker.Volumes)
	}
}

func TestRequiredSettingsAreEnforced(t *testing.T) {
	for _, missing := range []string{"MILLWRIGHT_CLUSTER_NAME", "AWS_REGION"} {
		t.Run(missing, func(t *testing.T) {
			env := userEnv()
			delete(env, missing)
			_, err := Load(context.Background(), repoRoot, env)
			if err == nil || !strings.Contains(err.Error(), missing) {
				t.Errorf("Load without %s: error %v, want one naming it", missing, err)
			}
		})
	}
}

func TestTemporalAndSchemaShareTheDatabase(t *testing.T) {
	project := load(t, userEnv())
	postgres := service(t, project, "postgresql")
	schema := service(t, project, "temporal-schema")
	temporal := service(t, project, "temporal")
	user, password := envValue(postgres, "POSTGRES_USER"), envValue(postgres, "POSTGRES_PASSWORD")
	if envValue(schema, "SQL_USER") != user || envValue(schema, "SQL_PASSWORD") != password || envValue(schema, "SQL_HOST") != "postgresql" {
		t.Errorf("temporal-schema connects as %s@%s", envValue(schema, "SQL_USER"), envValue(schema, "SQL_HOST"))
	}
	if envValue(temporal, "POSTGRES_USER") != user || envValue(temporal, "POSTGRES_PWD") != password || envValue(temporal, "POSTGRES_SEEDS") != "postgresql" {
		t.Errorf("temporal connects as %s@%s", envValue(temporal, "POSTGRES_USER"), envValue(temporal, "POSTGRES_SEEDS"))
	}
	// Every file the stack mounts from the repository exists.
	for _, s := range project.Services {
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind && strings.HasPrefix(v.Source, mustAbs(t, repoRoot)) {
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("%s mounts %s: %v", s.Name, v.Source, err)
				}
			}
		}
	}
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

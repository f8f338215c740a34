package cluster

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

// toolsSourceFixture is a local/tools look-alike: one directory per tools module
// holding a go.mod, a go.sum and, for etcd, its main package.
type toolsSourceFixture struct {
	t   *testing.T
	dir string
}

func newToolsSourceFixture(t *testing.T) *toolsSourceFixture {
	t.Helper()
	f := &toolsSourceFixture{t: t, dir: t.TempDir()}
	for _, module := range toolModules() {
		f.write(module+"/go.mod", "module example.com/"+module+"\n\ngo 1.26.0\n")
		f.write(module+"/go.sum", "")
	}
	f.write("etcd/cmd/etcd/main.go", "package main\n")
	return f
}

func (f *toolsSourceFixture) write(rel, content string) *toolsSourceFixture {
	f.t.Helper()
	path := filepath.Join(f.dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return f
}

func (f *toolsSourceFixture) key() string {
	f.t.Helper()
	key, err := toolsCacheKey(f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	return key
}

func TestToolsCacheKey(t *testing.T) {
	tests := []struct {
		name        string
		change      func(*toolsSourceFixture)
		wantChanged bool
	}{
		{name: "a bumped pin in go.mod", change: func(f *toolsSourceFixture) {
			f.write("kube/go.mod", "module example.com/kube\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v1.37.3\n")
		}, wantChanged: true},
		{name: "a changed go.sum", change: func(f *toolsSourceFixture) {
			f.write("kwok/go.sum", "sigs.k8s.io/kwok v0.8.0 h1:x\n")
		}, wantChanged: true},
		{name: "a changed etcd main", change: func(f *toolsSourceFixture) {
			f.write("etcd/cmd/etcd/main.go", "package main\n\nfunc main() {}\n")
		}, wantChanged: true},
		{name: "a README", change: func(f *toolsSourceFixture) {
			f.write("kube/README.md", "notes\n")
		}, wantChanged: false},
		{name: "the build script", change: func(f *toolsSourceFixture) {
			f.write("build.sh", "#!/bin/sh\n")
		}, wantChanged: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newToolsSourceFixture(t)
			before := f.key()
			tt.change(f)
			if changed := f.key() != before; changed != tt.wantChanged {
				t.Errorf("key changed = %v, want %v", changed, tt.wantChanged)
			}
		})
	}
}

func TestDefaultBinDirNamesVersionsAndKey(t *testing.T) {
	got := defaultBinDir("/home/u/.cache", "0123456789ab")
	want := "/home/u/.cache/millwright/kube-v1.37.2-kwok-v0.8.0-0123456789ab/bin"
	if got != want {
		t.Errorf("defaultBinDir = %s, want %s", got, want)
	}
}

func TestToolsBuildEnv(t *testing.T) {
	tests := []struct {
		name        string
		base        []string
		wantGoflags string
	}{
		{name: "no GOFLAGS", base: []string{"HOME=/h"}, wantGoflags: "-mod=readonly"},
		{name: "GOFLAGS kept", base: []string{"GOFLAGS=-buildvcs=false"}, wantGoflags: "-buildvcs=false -mod=readonly"},
		{name: "a -mod flag replaced", base: []string{"GOFLAGS=-mod=mod -buildvcs=false"}, wantGoflags: "-buildvcs=false -mod=readonly"},
		{name: "toolchain and workspace overridden", base: []string{"GOTOOLCHAIN=go1.99.0", "GOWORK=/w/go.work"}, wantGoflags: "-mod=readonly"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := toolsBuildEnv(tt.base)
			for key, want := range map[string]string{"GOTOOLCHAIN": "local", "GOWORK": "off", "GOFLAGS": tt.wantGoflags} {
				if got := envValue(env, key); got != want {
					t.Errorf("%s = %q, want %q", key, got, want)
				}
			}
			var toolchains int
			for _, kv := range env {
				if strings.HasPrefix(kv, "GOTOOLCHAIN=") {
					toolchains++
				}
			}
			if toolchains != 1 {
				t.Errorf("GOTOOLCHAIN set %d times, want once: %v", toolchains, env)
			}
		})
	}
}

// fakeGoCommand writes a script standing in for `go build`: it records each call
// and creates an executable at the -o path. The real compiler is exercised by the
// control-plane tests; this one keeps the caching logic testable in milliseconds.
func fakeGoCommand(t *testing.T) (command string, calls func() []string) {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "calls.log")
	script := `#!/bin/sh
out=""
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then out="$2"; shift; fi
  last="$1"
  shift
done
echo "$last" >> "` + logPath + `"
printf '#!/bin/sh\n' > "$out"
chmod +x "$out"
`
	command = filepath.Join(dir, "go")
	if err := os.WriteFile(command, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return command, func() []string {
		raw, err := os.ReadFile(logPath)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(raw))
	}
}

func TestEnsureToolsBuildsOnceAndReuses(t *testing.T) {
	source := newToolsSourceFixture(t)
	goCommand, calls := fakeGoCommand(t)
	binDir := filepath.Join(t.TempDir(), "bin")
	var progress bytes.Buffer
	opts := ToolsOptions{SourceDir: source.dir, BinDir: binDir, GoCommand: goCommand, Progress: &progress}

	tools, err := EnsureTools(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(calls()), len(toolRecipes()); got != want {
		t.Fatalf("first EnsureTools built %d binaries, want %d", got, want)
	}
	if !strings.Contains(progress.String(), "building kube-apiserver (first run, several minutes)...") {
		t.Errorf("progress does not announce kube-apiserver:\n%s", progress.String())
	}
	for _, r := range toolRecipes() {
		if _, err := os.Stat(tools.Path(r.binary)); err != nil {
			t.Errorf("binary %s missing: %v", r.binary, err)
		}
	}

	if _, err := EnsureTools(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if got, want := len(calls()), len(toolRecipes()); got != want {
		t.Errorf("second EnsureTools rebuilt: %d builds in all, want %d", got, want)
	}

	source.write("kube/go.sum", "k8s.io/kubernetes v1.37.2 h1:changed\n")
	if _, err := EnsureTools(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if got, want := len(calls()), 2*len(toolRecipes()); got != want {
		t.Errorf("after a go.sum change: %d builds in all, want %d", got, want)
	}
}

func TestEnsureToolsConcurrentCallersBuildOnce(t *testing.T) {
	source := newToolsSourceFixture(t)
	goCommand, calls := fakeGoCommand(t)
	binDir := filepath.Join(t.TempDir(), "bin")

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = EnsureTools(context.Background(), ToolsOptions{
				SourceDir: source.dir, BinDir: binDir, GoCommand: goCommand, Progress: &bytes.Buffer{},
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, want := len(calls()), len(toolRecipes()); got != want {
		t.Errorf("three concurrent callers built %d binaries, want %d (one build)", got, want)
	}
}

func TestEnsureToolsWithoutSource(t *testing.T) {
	complete := t.TempDir()
	for _, r := range toolRecipes() {
		if err := os.WriteFile(filepath.Join(complete, r.binary), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(t.TempDir(), "nothing-here")

	tests := []struct {
		name         string
		binDir       string
		wantNotFound bool
	}{
		{name: "a complete prebuilt directory is used as is", binDir: complete},
		{name: "an empty directory cannot be built", binDir: t.TempDir(), wantNotFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools, err := EnsureTools(context.Background(), ToolsOptions{SourceDir: missing, BinDir: tt.binDir})
			if tt.wantNotFound {
				if !IsToolsSourceNotFound(err) {
					t.Fatalf("err = %v, want ToolsSourceNotFoundError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tools.BinDir != tt.binDir {
				t.Errorf("BinDir = %s, want %s", tools.BinDir, tt.binDir)
			}
		})
	}
}

func TestKwokctlConfigKeepsEverythingLocal(t *testing.T) {
	tools := &Tools{BinDir: "/opt/tools"}
	raw, err := kwokctlConfig(tools, []int{1001, 1002, 1003, 1004, 1005, 1006}, "/state/kwok/cache")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Options           map[string]any `json:"options"`
		ComponentsPatches []struct {
			Name      string `json:"name"`
			ExtraArgs []struct {
				Key      string `json:"key"`
				Value    string `json:"value"`
				Override bool   `json:"override"`
			} `json:"extraArgs"`
		} `json:"componentsPatches"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"runtime":              "binary",
		"bindAddress":          "127.0.0.1",
		"kubeApiserverPort":    float64(1001),
		"kubeSchedulerPort":    float64(1006),
		"etcdBinary":           "/opt/tools/etcd",
		"kwokControllerBinary": "/opt/tools/kwok",
		"kubectlBinary":        "/opt/tools/kubectl",
	} {
		if got := doc.Options[key]; got != want {
			t.Errorf("options.%s = %v, want %v", key, got, want)
		}
	}
	args := map[string]string{}
	for _, patch := range doc.ComponentsPatches {
		if patch.Name != "kwok-controller" {
			continue
		}
		for _, a := range patch.ExtraArgs {
			args[a.Key] = a.Value
			if a.Key == "manage-all-nodes" && !a.Override {
				t.Errorf("manage-all-nodes must override kwokctl's --manage-all-nodes=true, not be appended")
			}
		}
	}
	if args["manage-all-nodes"] != "false" || args["manage-nodes-with-annotation-selector"] != "kwok.x-k8s.io/node=fake" {
		t.Errorf("kwok-controller args = %v, want only annotated nodes managed", args)
	}
}

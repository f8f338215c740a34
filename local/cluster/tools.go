package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Versions of the control plane built by local/tools. They must match the pins in
// local/tools/*/go.mod; the cache key hashes those files, so a changed pin rebuilds
// even if these constants are forgotten.
const (
	KubernetesVersion = "v1.37.2"
	KwokVersion       = "v0.8.0"
	EtcdVersion       = "v3.7.0"
)

// Environment variables that move where the binaries come from.
const (
	// EnvToolsDir overrides the directory that holds the built binaries.
	EnvToolsDir = "MILLWRIGHT_TOOLS_DIR"
	// EnvToolsSource overrides where the local/tools modules are found.
	EnvToolsSource = "MILLWRIGHT_TOOLS_SRC"
)

// Names of the binaries in Tools.BinDir.
const (
	BinaryEtcd                  = "etcd"
	BinaryKubeAPIServer         = "kube-apiserver"
	BinaryKubeControllerManager = "kube-controller-manager"
	BinaryKubeScheduler         = "kube-scheduler"
	BinaryKubectl               = "kubectl"
	BinaryKwok                  = "kwok"
	BinaryKwokctl               = "kwokctl"
)

// recipeRevision changes whenever the way binaries are built changes (flags,
// ldflags), so caches built the old way are not reused.
const recipeRevision = "recipe-2"

// toolRecipe says how one binary is built: which local/tools module, which package.
type toolRecipe struct {
	binary  string
	module  string // directory under local/tools holding the go.mod
	pkg     string
	ldflags []string
}

// kubeVersionLDFlags stamps the version that `--version`, `kubectl version` and the
// apiserver's /version report. kwokctl parses `--version` to choose flags, and a
// plain `go build` would report v0.0.0-master. The build date is fixed so that
// rebuilding from the same pins gives the same binary.
func kubeVersionLDFlags() []string {
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X", pkg+".gitVersion="+KubernetesVersion,
			"-X", pkg+".gitMajor=1",
			"-X", pkg+".gitMinor=37",
			"-X", pkg+".gitCommit=millwright-local-"+KubernetesVersion,
			"-X", pkg+".gitTreeState=clean",
			"-X", pkg+".buildDate=2026-01-01T00:00:00Z",
		)
	}
	return flags
}

// kwokVersionLDFlags makes kwokctl default to our Kubernetes version (it picks
// component flags from it) and report its own release without a pre-release tag.
func kwokVersionLDFlags() []string {
	return []string{
		"-X", "sigs.k8s.io/kwok/pkg/consts.Version=" + strings.TrimPrefix(KwokVersion, "v"),
		"-X", "sigs.k8s.io/kwok/pkg/consts.KubeVersion=" + strings.TrimPrefix(KubernetesVersion, "v"),
		"-X", "sigs.k8s.io/kwok/pkg/consts.PreRelease=GA",
	}
}

func toolRecipes() []toolRecipe {
	kube := kubeVersionLDFlags()
	kwok := kwokVersionLDFlags()
	return []toolRecipe{
		{binary: BinaryEtcd, module: "etcd", pkg: "./cmd/etcd",
			ldflags: []string{"-X", "go.etcd.io/etcd/api/v3/version.GitSHA=millwright-local"}},
		{binary: BinaryKubeAPIServer, module: "kube", pkg: "k8s.io/kubernetes/cmd/kube-apiserver", ldflags: kube},
		{binary: BinaryKubeControllerManager, module: "kube", pkg: "k8s.io/kubernetes/cmd/kube-controller-manager", ldflags: kube},
		{binary: BinaryKubeScheduler, module: "kube", pkg: "k8s.io/kubernetes/cmd/kube-scheduler", ldflags: kube},
		{binary: BinaryKubectl, module: "kube", pkg: "k8s.io/kubernetes/cmd/kubectl", ldflags: kube},
		{binary: BinaryKwok, module: "kwok", pkg: "sigs.k8s.io/kwok/cmd/kwok", ldflags: kwok},
		{binary: BinaryKwokctl, module: "kwok", pkg: "sigs.k8s.io/kwok/cmd/kwokctl", ldflags: kwok},
	}
}

// linkFlags are the full -ldflags value: symbols stripped (these are tools, not
// things we debug) plus the version stamps.
func (r toolRecipe) linkFlags() string {
	return strings.Join(append([]string{"-s", "-w"}, r.ldflags...), " ")
}

// ToolsOptions says where the binaries live and how to report building them.
// The zero value is what local runs want.
type ToolsOptions struct {
	// SourceDir is local/tools. Default: $MILLWRIGHT_TOOLS_SRC, else found by walking
	// up from the working directory, else next to this package's source.
	SourceDir string
	// BinDir holds the binaries. Default: $MILLWRIGHT_TOOLS_DIR, else
	// <user cache dir>/millwright/kube-<v>-kwok-<v>-<key>/bin.
	BinDir string
	// Progress receives one line per binary built. Default os.Stderr.
	Progress io.Writer
	// GoCommand is the go tool used to build. Default "go" from PATH.
	GoCommand string
}

// Tools is a directory holding every control-plane binary, ready to run.
type Tools struct {
	// BinDir is the directory holding the binaries.
	BinDir string
}

// Path is the absolute path of one binary (one of the Binary* names).
func (t *Tools) Path(binary string) string {
	return filepath.Join(t.BinDir, binary)
}

// KubectlPath is the path of the kubectl built from the pinned Kubernetes.
func (t *Tools) KubectlPath() string { return t.Path(BinaryKubectl) }

// stampName is the file in BinDir recording which cache key built its binaries.
const stampName = ".millwright-tools-key"

// EnsureTools returns the control-plane binaries, building the missing or stale
// ones first. Building takes many minutes on a cold Go build cache and prints one
// line per binary; afterwards it returns at once. Concurrent callers (several test
// binaries, a test and `starter dev`) serialise on a lock file: the first builds,
// the rest wait and reuse.
func EnsureTools(ctx context.Context, opts ToolsOptions) (*Tools, error) {
	progress := opts.Progress
	if progress == nil {
		progress = os.Stderr
	}

	sourceDir, sourceErr := resolveToolsSource(opts.SourceDir)
	binDir := opts.BinDir
	if binDir == "" {
		binDir = os.Getenv(EnvToolsDir)
	}

	if sourceErr != nil {
		// Without the sources there is no key to check and nothing to build from; a
		// directory named explicitly and already complete is still usable as is.
		if binDir != "" && allBinariesPresent(binDir) {
			return &Tools{BinDir: binDir}, nil
		}
		return nil, sourceErr
	}

	key, err := toolsCacheKey(sourceDir)
	if err != nil {
		return nil, err
	}
	if binDir == "" {
		cacheRoot, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("finding the user cache directory for the Kubernetes binaries (set %s instead): %w", EnvToolsDir, err)
		}
		binDir = defaultBinDir(cacheRoot, key)
	}
	if toolsUpToDate(binDir, key) {
		return &Tools{BinDir: binDir}, nil
	}

	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating tools directory %s: %w", binDir, err)
	}
	unlock, err := lockToolsDir(ctx, binDir, progress)
	if err != nil {
		return nil, err
	}
	defer unlock()

	// Another process may have finished the build while we waited for the lock.
	if toolsUpToDate(binDir, key) {
		return &Tools{BinDir: binDir}, nil
	}
	if err := buildTools(ctx, opts.GoCommand, sourceDir, binDir, key, progress); err != nil {
		return nil, err
	}
	return &Tools{BinDir: binDir}, nil
}

// defaultBinDir is where binaries go when nobody says otherwise: outside the
// repository, named by the versions for people and by the key for correctness.
func defaultBinDir(cacheRoot, key string) string {
	name := fmt.Sprintf("kube-%s-kwok-%s-%s", KubernetesVersion, KwokVersion, key)
	return filepath.Join(cacheRoot, "millwright", name, "bin")
}

// resolveToolsSource finds local/tools: explicit option, then environment, then the
// working directory and its parents, then this source file's location (go test and
// go run keep it; -trimpath builds do not).
func resolveToolsSource(explicit string) (string, error) {
	var candidates []string
	switch {
	case explicit != "":
		candidates = append(candidates, explicit)
	case os.Getenv(EnvToolsSource) != "":
		candidates = append(candidates, os.Getenv(EnvToolsSource))
	default:
		if wd, err := os.Getwd(); err == nil {
			for dir := wd; ; dir = filepath.Dir(dir) {
				candidates = append(candidates, filepath.Join(dir, "local", "tools"))
				if filepath.Dir(dir) == dir {
					break
				}
			}
		}
		if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
			candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "tools"))
		}
	}
	for _, dir := range candidates {
		if isToolsSource(dir) {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return "", fmt.Errorf("resolving tools source %s: %w", dir, err)
			}
			return abs, nil
		}
	}
	return "", &ToolsSourceNotFoundError{Searched: candidates}
}

func isToolsSource(dir string) bool {
	for _, module := range toolModules() {
		if _, err := os.Stat(filepath.Join(dir, module, "go.mod")); err != nil {
			return false
		}
	}
	return true
}

func toolModules() []string {
	var modules []string
	for _, r := range toolRecipes() {
		if !slices.Contains(modules, r.module) {
			modules = append(modules, r.module)
		}
	}
	return modules
}

// toolsCacheKey hashes everything that decides the bytes of the binaries: each
// tools module's go.mod, go.sum and Go sources, and the build recipe. 12 hex
// digits keep directory names short while making accidental reuse implausible.
func toolsCacheKey(sourceDir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", recipeRevision)
	for _, r := range toolRecipes() {
		fmt.Fprintf(h, "%s %s %s %s\n", r.binary, r.module, r.pkg, r.linkFlags())
	}
	for _, module := range toolModules() {
		root := filepath.Join(sourceDir, module)
		var files []string
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() && path != root && strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			if !d.IsDir() && (name == "go.mod" || name == "go.sum" || strings.HasSuffix(name, ".go")) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("hashing tools module %s: %w", root, err)
		}
		slices.Sort(files)
		for _, path := range files {
			data, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("hashing tools module file %s: %w", path, err)
			}
			rel, _ := filepath.Rel(sourceDir, path)
			fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(data))
			h.Write(data)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func allBinariesPresent(binDir string) bool {
	for _, r := range toolRecipes() {
		info, err := os.Stat(filepath.Join(binDir, r.binary))
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o100 == 0 {
			return false
		}
	}
	return true
}

func toolsUpToDate(binDir, key string) bool {
	stamp, err := os.ReadFile(filepath.Join(binDir, stampName))
	if err != nil || strings.TrimSpace(string(stamp)) != key {
		return false
	}
	return allBinariesPresent(binDir)
}

// lockToolsDir takes an exclusive flock on binDir/.lock. flock is released by the
// kernel when a process dies, so a crashed build never wedges later runs.
func lockToolsDir(ctx context.Context, binDir string, progress io.Writer) (func(), error) {
	path := filepath.Join(binDir, ".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening tools lock %s: %w", path, err)
	}
	unlock := func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return unlock, nil
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}

	fmt.Fprintf(progress, "waiting for another process building the Kubernetes binaries in %s...\n", binDir)
	locked := make(chan error, 1)
	go func() { locked <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-locked:
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		return unlock, nil
	case <-ctx.Done():
		// Closing the file releases the lock should the goroutine still get it.
		_ = f.Close()
		return nil, fmt.Errorf("waiting for tools lock %s: %w", path, ctx.Err())
	}
}

// buildTools (re)builds every binary into binDir. Each one is linked to a
// temporary name and renamed into place, so a reader never sees half a binary.
// The stamp is written last: its presence means the whole set is complete.
func buildTools(ctx context.Context, goCommand, sourceDir, binDir, key string, progress io.Writer) error {
	if goCommand == "" {
		goCommand = "go"
	}
	_ = os.Remove(filepath.Join(binDir, stampName))
	env := toolsBuildEnv(os.Environ())
	for _, r := range toolRecipes() {
		final := filepath.Join(binDir, r.binary)
		fmt.Fprintf(progress, "building %s (first run, several minutes)...\n", r.binary)
		started := time.Now()
		tmp := fmt.Sprintf("%s.tmp-%d", final, os.Getpid())
		// -buildvcs=false: the etcd main sits in this git checkout, and stamping the
		// commit into it would make the binary differ per commit (and fail outright
		// where git refuses the checkout's ownership).
		cmd := exec.CommandContext(ctx, goCommand, "build", "-trimpath", "-buildvcs=false", "-ldflags", r.linkFlags(), "-o", tmp, r.pkg)
		cmd.Dir = filepath.Join(sourceDir, r.module)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		if err := cmd.Run(); err != nil {
			_ = os.Remove(tmp)
			return &ToolBuildError{Binary: r.binary, Output: lastLines(out.String(), 40), Err: err}
		}
		if err := os.Rename(tmp, final); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("installing %s into %s: %w", r.binary, binDir, err)
		}
		fmt.Fprintf(progress, "built %s in %s\n", r.binary, time.Since(started).Round(time.Second))
	}
	if err := os.WriteFile(filepath.Join(binDir, stampName), []byte(key+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing tools stamp in %s: %w", binDir, err)
	}
	return nil
}

// toolsBuildEnv is the caller's environment with the settings that keep the build
// reproducible and offline-safe: the machine's Go (never a downloaded toolchain),
// no go.work from an enclosing directory, and go.mod/go.sum used as written.
func toolsBuildEnv(base []string) []string {
	env := slices.DeleteFunc(slices.Clone(base), func(kv string) bool {
		return strings.HasPrefix(kv, "GOTOOLCHAIN=") || strings.HasPrefix(kv, "GOWORK=") || strings.HasPrefix(kv, "GOFLAGS=")
	})
	goflags := slices.DeleteFunc(strings.Fields(envValue(base, "GOFLAGS")), func(flag string) bool {
		return strings.HasPrefix(flag, "-mod=")
	})
	goflags = append(goflags, "-mod=readonly")
	return append(env, "GOTOOLCHAIN=local", "GOWORK=off", "GOFLAGS="+strings.Join(goflags, " "))
}

// envValue is the value of key in an os.Environ-style list, last one winning.
func envValue(env []string, key string) string {
	value := ""
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			value = v
		}
	}
	return value
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

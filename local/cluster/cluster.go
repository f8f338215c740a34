package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// Annotation by which kwok recognises the Nodes it plays the kubelet for. The EC2
// emulator puts it on every Node it registers; Nodes without it are left alone.
const (
	FakeNodeAnnotation      = "kwok.x-k8s.io/node"
	FakeNodeAnnotationValue = "fake"
)

// DefaultName is the kwok cluster name when Options.Name is empty.
const DefaultName = "millwright"

// Options configures Start and Attach.
type Options struct {
	// Name of the kwok cluster; also the kubeconfig context "kwok-<Name>".
	// Default DefaultName.
	Name string
	// WorkDir is the state directory that holds everything the cluster writes:
	// kwokctl's work dir (etcd data, pki, logs, pid files) lives in WorkDir/kwok.
	// Required for Start.
	WorkDir string
	// KubeconfigPath is where the admin kubeconfig is written (Start) or read
	// (Attach). Default WorkDir/kubeconfig.
	KubeconfigPath string
	// Logger receives lifecycle lines. Default: no logging.
	Logger *zap.Logger
	// Tools says where the binaries are and how building them is reported.
	Tools ToolsOptions
	// StartTimeout bounds kwokctl create plus the readiness wait. Default 5m: the
	// apiserver alone takes tens of seconds on a loaded two-core machine.
	StartTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.KubeconfigPath == "" && o.WorkDir != "" {
		o.KubeconfigPath = filepath.Join(o.WorkDir, "kubeconfig")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 5 * time.Minute
	}
	return o
}

var clusterNamePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func (o Options) validate(needWorkDir bool) error {
	if !clusterNamePattern.MatchString(o.Name) {
		return &InvalidOptionError{Field: "Name", Reason: fmt.Sprintf("%q is not a DNS label (lower-case letters, digits, '-')", o.Name)}
	}
	if needWorkDir && o.WorkDir == "" {
		return &InvalidOptionError{Field: "WorkDir", Reason: "required: the cluster's etcd data, certificates and logs live there"}
	}
	if o.KubeconfigPath == "" {
		return &InvalidOptionError{Field: "KubeconfigPath", Reason: "required when WorkDir is empty"}
	}
	return nil
}

// Cluster is a running control plane: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and the kwok controller.
type Cluster struct {
	name           string
	kubeconfigPath string
	tools          *Tools
	restConfig     *rest.Config
	clientset      *kubernetes.Clientset
	logger         *zap.Logger

	// Set only for clusters this process started; Stop tears those down.
	owned       bool
	kwokWorkDir string
	kwokctlLog  string
	ports       []int
	// reaper ends the components if this process exits without Stop
	// (reaper.go).
	reaper *os.Process

	stopOnce sync.Once
	stopErr  error
}

// Name is the kwok cluster name.
func (c *Cluster) Name() string { return c.name }

// KubeconfigPath is the admin kubeconfig, for `export KUBECONFIG=…`.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfigPath }

// APIServerURL is the apiserver's https address on 127.0.0.1.
func (c *Cluster) APIServerURL() string { return c.restConfig.Host }

// RESTConfig is a copy of the admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Clientset is an admin clientset for the cluster.
func (c *Cluster) Clientset() *kubernetes.Clientset { return c.clientset }

// KubectlPath is the kubectl built from the same Kubernetes release.
func (c *Cluster) KubectlPath() string { return c.tools.KubectlPath() }

// Tools are the binaries the cluster runs from.
func (c *Cluster) Tools() *Tools { return c.tools }

// Start builds the binaries if needed, creates the cluster with kwokctl's binary
// runtime on free 127.0.0.1 ports, and returns once the apiserver is ready and the
// default ServiceAccount exists (so pods can be created at once). A stale cluster
// of the same name left in WorkDir by a crashed run is deleted first. A
// component that exits while the cluster starts fails the attempt at once,
// with its log's tail; Start then tries once more on new ports. On error
// nothing is left running.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if err := opts.validate(true); err != nil {
		return nil, err
	}
	tools, err := EnsureTools(ctx, opts.Tools)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	workDir, err := filepath.Abs(opts.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("resolving cluster WorkDir %s: %w", opts.WorkDir, err)
	}
	kubeconfigPath, err := filepath.Abs(opts.KubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("resolving cluster KubeconfigPath %s: %w", opts.KubeconfigPath, err)
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cluster WorkDir %s: %w", workDir, err)
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfigPath), 0o755); err != nil {
		return nil, fmt.Errorf("creating directory for kubeconfig %s: %w", kubeconfigPath, err)
	}

	c := &Cluster{
		name:           opts.Name,
		kubeconfigPath: kubeconfigPath,
		tools:          tools,
		logger:         opts.Logger.With(zap.String("cluster", opts.Name)),
		owned:          true,
		kwokWorkDir:    filepath.Join(workDir, "kwok"),
		kwokctlLog:     filepath.Join(workDir, "kwokctl.log"),
	}

	if _, err := os.Stat(c.clusterDir()); err == nil {
		c.logger.Info("deleting a stale cluster left by an earlier run", zap.String("dir", c.clusterDir()))
		if err := c.teardown(ctx); err != nil {
			// A run that crashed mid-create may leave a config kwokctl cannot load;
			// its pid files are still enough to end what it started.
			c.logger.Warn("kwokctl could not delete the stale cluster; killing its processes", zap.Error(err))
			for _, pid := range c.componentPIDs() {
				if processAlive(pid) {
					_ = killProcess(pid)
				}
			}
			if err := os.RemoveAll(c.clusterDir()); err != nil {
				return nil, fmt.Errorf("removing stale cluster directory %s: %w", c.clusterDir(), err)
			}
		}
	}

	// Before create, so that a run killed while the control plane starts
	// leaves nothing running either.
	if c.reaper, err = startReaper(os.Getpid(), filepath.Join(c.clusterDir(), "pids")); err != nil {
		// Only a killed run needs it; the cluster itself is fine.
		c.logger.Warn("could not start the reaper that ends the control plane if this process is killed", zap.Error(err))
	}
	started := time.Now()
	for attempt := 1; ; attempt++ {
		err = c.create(ctx, workDir, tools)
		if err == nil {
			break
		}
		// A half-created cluster is torn down with a fresh context: ours may be
		// the one that expired.
		cleanupCtx, cleanupCancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		stopErr := c.teardown(cleanupCtx)
		cleanupCancel()
		if stopErr != nil {
			c.logger.Warn("cleaning up after failed start", zap.Error(stopErr))
		}
		// A component that exited at once most likely lost its port to
		// another process between FreeLocalPorts and its bind: once more,
		// on new ports.
		if attempt == maxStartAttempts || !IsComponentExited(err) || ctx.Err() != nil {
			if c.reaper != nil {
				_ = c.reaper.Kill()
			}
			return nil, err
		}
		c.logger.Warn("a control-plane component exited while starting; starting again on new ports", zap.Error(err))
	}
	c.logger.Info("Kubernetes control plane ready",
		zap.String("kubeconfig", kubeconfigPath), zap.Duration("elapsed", time.Since(started)))
	return c, nil
}

// maxStartAttempts bounds Start's attempts when a component exits while
// the cluster starts.
const maxStartAttempts = 2

// create picks the ports, writes the kwokctl config, runs kwokctl create
// cluster and waits for readiness. On error the caller tears down.
func (c *Cluster) create(ctx context.Context, workDir string, tools *Tools) error {
	ports, err := FreeLocalPorts(6)
	if err != nil {
		return err
	}
	c.ports = ports
	configPath := filepath.Join(workDir, "kwokctl.yaml")
	config, err := kwokctlConfig(tools, ports, filepath.Join(c.kwokWorkDir, "cache"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		return fmt.Errorf("writing kwokctl config %s: %w", configPath, err)
	}
	c.logger.Info("starting Kubernetes control plane",
		zap.String("workDir", workDir), zap.Int("apiserverPort", ports[0]))
	err = c.kwokctl(ctx, "create cluster",
		"--config", configPath,
		"create", "cluster",
		"--runtime", "binary",
		"--kubeconfig", c.kubeconfigPath,
	)
	if err != nil {
		return err
	}
	return c.connect(ctx)
}

// Attach returns a cluster that is already running (an earlier `starter dev`, a
// CI service), found through opts.KubeconfigPath and its current context. The
// binaries are still ensured so KubectlPath works. Stop on an attached cluster
// does nothing: whoever started it owns it.
func Attach(ctx context.Context, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if err := opts.validate(false); err != nil {
		return nil, err
	}
	tools, err := EnsureTools(ctx, opts.Tools)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	c := &Cluster{
		name:           opts.Name,
		kubeconfigPath: opts.KubeconfigPath,
		tools:          tools,
		logger:         opts.Logger.With(zap.String("cluster", opts.Name)),
	}
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Stop deletes a cluster this process started (`kwokctl delete cluster`) and
// checks that none of its processes or ports is left; stragglers are killed and
// reported as a LeftoverProcessError. Safe to call more than once.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		if !c.owned {
			return
		}
		c.stopErr = c.teardown(ctx)
		if c.reaper != nil {
			_ = c.reaper.Kill()
		}
		if c.stopErr == nil {
			c.logger.Info("Kubernetes control plane stopped")
		}
	})
	return c.stopErr
}

func (c *Cluster) clusterDir() string {
	return filepath.Join(c.kwokWorkDir, "clusters", c.name)
}

// teardown runs kwokctl delete and then verifies the processes recorded in the pid
// files are gone and the ports are closed.
func (c *Cluster) teardown(ctx context.Context) error {
	pids := c.componentPIDs()
	deleteErr := c.kwokctl(ctx, "delete cluster", "delete", "cluster", "--kubeconfig", c.kubeconfigPath)

	var alive []int
	var open []int
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		alive = slices.DeleteFunc(slices.Clone(pids), func(pid int) bool { return !processAlive(pid) })
		open = slices.DeleteFunc(slices.Clone(c.ports), func(port int) bool { return !portListening(port) })
		return len(alive) == 0 && len(open) == 0, nil
	})
	if len(alive) > 0 {
		for _, pid := range alive {
			_ = killProcess(pid)
		}
	}
	if len(alive) > 0 || len(open) > 0 {
		return errors.Join(deleteErr, &LeftoverProcessError{PIDs: alive, Ports: open})
	}
	return deleteErr
}

// exitedComponent reports the first component of a cluster this process
// started whose recorded process is gone, or nil.
func (c *Cluster) exitedComponent() *ComponentExitedError {
	if !c.owned {
		return nil
	}
	for _, p := range c.componentProcesses() {
		if !processAlive(p.pid) {
			return &ComponentExitedError{Component: p.component, PID: p.pid, LogTail: c.componentLogTail(p.component, 20)}
		}
	}
	return nil
}

// componentPIDs are the pids kwokctl's binary runtime recorded for the
// components.
func (c *Cluster) componentPIDs() []int {
	var pids []int
	for _, p := range c.componentProcesses() {
		pids = append(pids, p.pid)
	}
	return pids
}

// componentProcess is a component and the pid kwokctl recorded for it.
type componentProcess struct {
	component string
	pid       int
}

// componentProcesses reads the pid files kwokctl keeps per component, in
// the components' name order.
func (c *Cluster) componentProcesses() []componentProcess {
	files, _ := filepath.Glob(filepath.Join(c.clusterDir(), "pids", "*.pid"))
	var out []componentProcess
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && pid > 0 {
			out = append(out, componentProcess{component: strings.TrimSuffix(filepath.Base(f), ".pid"), pid: pid})
		}
	}
	return out
}

// SaveLogs copies the components' logs (etcd, kube-apiserver, the
// controller manager, the scheduler, kwok) into dir, so a failed run keeps
// them: `kwokctl delete cluster` removes them with the cluster. It copies
// what exists and reports every copy that failed.
func (c *Cluster) SaveLogs(dir string) error {
	files, _ := filepath.Glob(filepath.Join(c.clusterDir(), "logs", "*.log"))
	if len(files) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("saving control-plane logs: %w", err)
	}
	var errs []error
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.Base(f)), raw, 0o644)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("saving control-plane log %s: %w", filepath.Base(f), err))
		}
	}
	return errors.Join(errs...)
}

// componentLogTail is the last n lines of a component's log, or "" when
// there is none.
func (c *Cluster) componentLogTail(component string, n int) string {
	raw, err := os.ReadFile(filepath.Join(c.clusterDir(), "logs", component+".log"))
	if err != nil {
		return ""
	}
	return lastLines(string(raw), n)
}

// kwokctl runs one kwokctl command with an environment that keeps it inside our
// work dir and off the network: KWOK_WORKDIR points at our state, inherited
// KWOK_* settings are dropped (they would override the config file), and the
// tools directory comes first on PATH because kwokctl looks kubectl up there
// before falling back to a download.
func (c *Cluster) kwokctl(ctx context.Context, what string, args ...string) error {
	args = append([]string{"--name", c.name}, args...)
	cmd := exec.CommandContext(ctx, c.tools.Path(BinaryKwokctl), args...)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "KWOK_") || strings.HasPrefix(kv, "PATH=")
	})
	cmd.Env = append(env,
		"KWOK_WORKDIR="+c.kwokWorkDir,
		"PATH="+c.tools.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
	cmd.WaitDelay = 10 * time.Second

	if err := os.MkdirAll(filepath.Dir(c.kwokctlLog), 0o755); err != nil {
		return fmt.Errorf("creating directory for kwokctl log %s: %w", c.kwokctlLog, err)
	}
	logFile, err := os.OpenFile(c.kwokctlLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening kwokctl log %s: %w", c.kwokctlLog, err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "\n$ kwokctl %s\n", strings.Join(args, " "))
	var tail bytes.Buffer
	cmd.Stdout = io.MultiWriter(logFile, &tail)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		return &KwokctlError{Command: what, LogPath: c.kwokctlLog, Output: lastLines(tail.String(), 30), Err: err}
	}
	return nil
}

// connect loads the kubeconfig and waits until the apiserver reports ready and the
// service-account controller has created the default ServiceAccount, which pod
// admission requires.
func (c *Cluster) connect(ctx context.Context) error {
	restConfig, err := clientcmd.BuildConfigFromFlags("", c.kubeconfigPath)
	if err != nil {
		return fmt.Errorf("loading kubeconfig %s: %w", c.kubeconfigPath, err)
	}
	clientset, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("building clientset from kubeconfig %s: %w", c.kubeconfigPath, err)
	}
	c.restConfig = restConfig
	c.clientset = clientset

	var lastErr error
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if exited := c.exitedComponent(); exited != nil {
			return false, exited
		}
		body, err := clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			lastErr = fmt.Errorf("%w: %s", err, bytes.TrimSpace(body))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return &NotReadyError{Check: "apiserver /readyz at " + restConfig.Host, Err: errors.Join(err, lastErr)}
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if exited := c.exitedComponent(); exited != nil {
			return false, exited
		}
		_, err := clientset.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lastErr = err
			return false, nil
		}
		if err != nil {
			lastErr = err
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		// The controller manager creates it; its log says why it did not.
		err = errors.Join(err, lastErr)
		if tail := c.componentLogTail(ComponentKubeControllerManager, 20); tail != "" {
			err = fmt.Errorf("%w\nkube-controller-manager log tail:\n%s", err, tail)
		}
		return &NotReadyError{Check: "default ServiceAccount in namespace default", Err: err}
	}
	return nil
}

// extraArg is one flag of a kwokctl component patch.
type extraArg struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Override bool   `json:"override"`
}

// kwokctlConfig is the KwokctlConfiguration handed to `kwokctl --config`. Every
// binary is a local file, so kwokctl never downloads; every listener is on
// 127.0.0.1 at a port we chose; and the kwok controller manages only Nodes
// annotated kwok.x-k8s.io/node=fake (kwokctl's binary runtime would otherwise pass
// --manage-all-nodes=true). The default node and pod stages are left to kwokctl,
// which writes them into the cluster's kwok.yaml when no Stage is configured.
func kwokctlConfig(tools *Tools, ports []int, cacheDir string) ([]byte, error) {
	type componentPatch struct {
		Name      string     `json:"name"`
		ExtraArgs []extraArg `json:"extraArgs"`
	}
	doc := map[string]any{
		"apiVersion": "config.kwok.x-k8s.io/v1alpha1",
		"kind":       "KwokctlConfiguration",
		"options": map[string]any{
			"runtime":                     "binary",
			"kubeVersion":                 KubernetesVersion,
			"kwokVersion":                 KwokVersion,
			"etcdVersion":                 strings.TrimPrefix(EtcdVersion, "v"),
			"bindAddress":                 "127.0.0.1",
			"kubeApiserverPort":           ports[0],
			"etcdPort":                    ports[1],
			"etcdPeerPort":                ports[2],
			"kwokControllerPort":          ports[3],
			"kubeControllerManagerPort":   ports[4],
			"kubeSchedulerPort":           ports[5],
			"cacheDir":                    cacheDir,
			"quietPull":                   true,
			"etcdBinary":                  tools.Path(BinaryEtcd),
			"kubeApiserverBinary":         tools.Path(BinaryKubeAPIServer),
			"kubeControllerManagerBinary": tools.Path(BinaryKubeControllerManager),
			"kubeSchedulerBinary":         tools.Path(BinaryKubeScheduler),
			"kubectlBinary":               tools.Path(BinaryKubectl),
			"kwokControllerBinary":        tools.Path(BinaryKwok),
			"components": []string{
				"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller",
			},
		},
		"componentsPatches": []componentPatch{{
			Name: "kwok-controller",
			ExtraArgs: []extraArg{
				{Key: "manage-all-nodes", Value: "false", Override: true},
				{Key: "manage-nodes-with-annotation-selector", Value: FakeNodeAnnotation + "=" + FakeNodeAnnotationValue},
			},
		}, {
			// A production control plane's client rates, not the defaults
			// (20 QPS for the controller manager, 50 for the scheduler):
			// the ReplicaSet controller would create 1,000 pods in ~50 s and
			// hide Millwright's own latency.
			Name:      "kube-controller-manager",
			ExtraArgs: singleInstanceArgs(controlPlaneQPS, controlPlaneBurst),
		}, {
			Name:      "kube-scheduler",
			ExtraArgs: singleInstanceArgs(controlPlaneQPS, controlPlaneBurst),
		}},
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding kwokctl config: %w", err)
	}
	return out, nil
}

// controlPlaneQPS and controlPlaneBurst are the controller manager's and
// the scheduler's client rates (--kube-api-qps, --kube-api-burst), as large
// production clusters set them.
const (
	controlPlaneQPS   = 300
	controlPlaneBurst = 500
)

// singleInstanceArgs are the controller manager's and the scheduler's
// --kube-api-qps and --kube-api-burst, and --leader-elect=false: each runs
// once, and a leader that cannot renew its lease while the apiserver
// restarts (RestartComponent) would exit and nobody would start it again.
func singleInstanceArgs(qps, burst int) []extraArg {
	// Appended (Override only replaces a flag kwokctl already passes, and
	// it passes none of these).
	return []extraArg{
		{Key: "kube-api-qps", Value: strconv.Itoa(qps)},
		{Key: "kube-api-burst", Value: strconv.Itoa(burst)},
		{Key: "leader-elect", Value: "false"},
	}
}

// FreeLocalPorts picks n distinct free ports on 127.0.0.1 below the
// kernel's ephemeral range, so no outgoing connection can hold one of them
// as its source port. That matters for a component RestartComponent
// restarts: while the apiserver is down, its clients keep dialing its port,
// and a dial to a port of the ephemeral range with nothing listening can be
// given that same port as its source and connect to itself (TCP
// simultaneous open); the restarted apiserver then fails to bind ("address
// already in use") and never comes back. All listeners are held until
// every port is chosen so none is handed out twice. Without room below the
// ephemeral range it falls back to ports the kernel picks.
func FreeLocalPorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	lowest, below := lowestStablePort, ephemeralPortsStart()
	if below-lowest >= 100*n {
		start := lowest + rand.IntN(below-lowest)
		for i := 0; i < below-lowest && len(ports) < n; i++ {
			port := lowest + (start-lowest+i)%(below-lowest)
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				continue // in use
			}
			listeners = append(listeners, l)
			ports = append(ports, port)
		}
	}
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port on 127.0.0.1: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// lowestStablePort is the lowest port FreeLocalPorts picks (below: the
// well-known and many registered services).
const lowestStablePort = 10000

// ephemeralPortsStart is the first port of the kernel's ephemeral range
// (Linux's /proc/sys/net/ipv4/ip_local_port_range; 32768, its default,
// elsewhere).
func ephemeralPortsStart() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return 32768
	}
	start, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return start
}

func portListening(port int) bool {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

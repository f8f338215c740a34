// Package clustertesting gives a test package one real Kubernetes control
// plane (local/cluster: etcd, kube-apiserver, controller-manager, scheduler,
// kwok) with Millwright's CRDs installed, shared by all its tests through
// TestMain, plus the few helpers every such package needs: polling with a
// deadline, unique names, a namespace per test. Under -short no control plane
// starts and the tests that need one skip.
package clustertesting

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/millwright/millwright/deploy/crds"
	"github.com/millwright/millwright/local/cluster"
)

// Options name the control plane and tune its clients.
type Options struct {
	// Name names the kwok cluster; it appears in process lists and logs.
	Name string
	// QPS and Burst raise client-go's client-side rate limit (5/10 by
	// default) for tests that write in quick succession; zero keeps it.
	QPS   float32
	Burst int
	// Logger receives the cluster's lifecycle lines (default: none).
	Logger *zap.Logger
}

// Env is the control plane a package's tests share, and its clients.
type Env struct {
	Cluster    *cluster.Cluster
	RESTConfig *rest.Config
	Clientset  kubernetes.Interface
	Dynamic    dynamic.Interface
}

// Main is a TestMain body: under -short it only runs m; otherwise it starts
// the control plane (building its binaries on a cold cache first, before go
// test's -timeout clock starts in m.Run), installs the CRDs, calls setup
// (which stores env for the tests and may start more), runs m and stops
// everything. It returns the exit code.
//
//	func TestMain(m *testing.M) { os.Exit(clustertesting.Main(m, clustertesting.Options{Name: "x"}, setup)) }
func Main(m *testing.M, opts Options, setup func(ctx context.Context, env *Env) (teardown func(), err error)) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		return m.Run()
	}
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "%s tests: %s: %v\n", opts.Name, what, err)
		return 1
	}
	workDir, err := os.MkdirTemp("", "millwright-"+opts.Name+"-")
	if err != nil {
		return fail("work dir", err)
	}
	defer os.RemoveAll(workDir)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()

	started := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{Name: opts.Name, WorkDir: workDir, Logger: opts.Logger})
	if err != nil {
		return fail("starting the control plane", err)
	}
	defer func() {
		if err := c.Stop(context.Background()); err != nil {
			fmt.Fprintf(os.Stderr, "%s tests: stopping the control plane: %v\n", opts.Name, err)
		}
	}()
	fmt.Fprintf(os.Stderr, "%s tests: control plane ready in %s\n", opts.Name, time.Since(started).Round(time.Millisecond))

	config := c.RESTConfig()
	if opts.QPS > 0 {
		config.QPS, config.Burst = opts.QPS, opts.Burst
	}
	env := &Env{Cluster: c, RESTConfig: config}
	if env.Clientset, err = kubernetes.NewForConfig(config); err != nil {
		return fail("clientset", err)
	}
	if env.Dynamic, err = dynamic.NewForConfig(config); err != nil {
		return fail("dynamic client", err)
	}
	if err := crds.Install(ctx, config); err != nil {
		return fail("installing CRDs", err)
	}
	if setup != nil {
		teardown, err := setup(ctx, env)
		if teardown != nil {
			defer teardown()
		}
		if err != nil {
			return fail("setup", err)
		}
	}
	return m.Run()
}

// Eventually polls condition every 100 ms until it holds or timeout passes,
// then fails the test naming what it waited for and the last error. The
// control plane is real processes, so observing it is the only
// synchronisation there is.
func Eventually(t testing.TB, timeout time.Duration, what string, condition func(ctx context.Context) (bool, error)) {
	t.Helper()
	var lastErr error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := condition(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last error: %v)", what, timeout, lastErr)
	}
}

// UniqueName is prefix plus a random suffix: tests share one cluster.
func UniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// CreateNamespace makes a namespace for one test (deleted after it) and
// waits for its default ServiceAccount, without which pod admission
// rejects pods.
func CreateNamespace(t testing.TB, client kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := client.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	Eventually(t, time.Minute, "default ServiceAccount in "+ns.Name, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
	return ns.Name
}

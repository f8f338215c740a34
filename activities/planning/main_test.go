package planning

import (
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/deploy/crds"
	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/cluster"
)

// What this package's tests share: one real control plane with the
// Millwright CRDs installed, and one EC2 emulator behind an HTTP server with
// a real SDK client pointed at it. Nil under -short, where the tests that
// need them skip.
var (
	testCluster   *cluster.Cluster
	testClientset kubernetes.Interface
	testDynamic   dynamic.Interface
	testEC2       *ec2.Client
	// testProvider is shared by tests that leave its caches alone, so the
	// emulator's catalog is read once.
	testProvider *cloud.Provider
)

const testRegion = "us-east-1"

// TestMain starts the control plane and the emulator. Building the control
// plane binaries on a cold cache happens here, before go test's -timeout
// clock starts in m.Run.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(runWithStack(m))
}

func runWithStack(m *testing.M) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "planning tests: %s: %v\n", what, err)
		return 1
	}
	workDir, err := os.MkdirTemp("", "millwright-planning-")
	if err != nil {
		return fail("work dir", err)
	}
	defer os.RemoveAll(workDir)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()

	started := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{Name: "planning", WorkDir: workDir})
	if err != nil {
		return fail("starting the control plane", err)
	}
	defer func() {
		if err := c.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "planning tests: stopping the control plane:", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "planning tests: control plane ready in %s\n", time.Since(started).Round(time.Millisecond))
	testCluster = c
	// The tests create objects and plan in quick succession; client-go's
	// default client-side limit (5 requests/s) would make them wait.
	restConfig := c.RESTConfig()
	restConfig.QPS, restConfig.Burst = 200, 400
	if testClientset, err = kubernetes.NewForConfig(restConfig); err != nil {
		return fail("clientset", err)
	}
	if testDynamic, err = dynamic.NewForConfig(restConfig); err != nil {
		return fail("dynamic client", err)
	}
	if err := installCRDs(ctx, testDynamic); err != nil {
		return fail("installing CRDs", err)
	}

	// The emulator registers no Nodes: planning only reads EC2's catalog.
	emu, err := awsemu.New(awsemu.Options{})
	if err != nil {
		return fail("EC2 emulator", err)
	}
	server := httptest.NewServer(emu.Handler())
	defer func() {
		server.Close()
		_ = emu.Close()
	}()
	testEC2, err = cloud.NewEC2Client(ctx, cloud.Config{
		Region: testRegion, Endpoint: server.URL,
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		RetryMaxAttempts: 2, RetryMaxBackoff: time.Millisecond,
	})
	if err != nil {
		return fail("EC2 client", err)
	}
	if testProvider, err = cloud.New(cloud.Options{EC2: testEC2, Region: testRegion}); err != nil {
		return fail("EC2 provider", err)
	}
	return m.Run()
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs creates the embedded CRDs and waits until they are Established.
func installCRDs(ctx context.Context, client dynamic.Interface) error {
	for name, manifest := range crds.All() {
		var obj map[string]any
		if err := yaml.Unmarshal(manifest, &obj); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		crd := &unstructured.Unstructured{Object: obj}
		if _, err := client.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.GetName(), err)
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			live, err := client.Resource(crdResource).Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
			for _, c := range conditions {
				condition, _ := c.(map[string]any)
				if condition["type"] == "Established" && condition["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not Established: %w", crd.GetName(), err)
		}
	}
	return nil
}

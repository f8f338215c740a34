package planning

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/cluster"
	"github.com/millwright/millwright/local/cluster/clustertesting"
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

// TestMain starts the control plane (CRDs installed) and the emulator.
func TestMain(m *testing.M) {
	os.Exit(clustertesting.Main(m, clustertesting.Options{Name: "planning", QPS: 200, Burst: 400}, setup))
}

// setup stores the shared control plane's clients (their client-side rate
// limit is raised: the tests create objects and plan in quick succession)
// and starts the emulator with an SDK client pointed at it.
func setup(ctx context.Context, env *clustertesting.Env) (func(), error) {
	testCluster, testClientset, testDynamic = env.Cluster, env.Clientset, env.Dynamic
	// The emulator registers no Nodes: planning only reads EC2's catalog.
	emu, err := awsemu.New(awsemu.Options{})
	if err != nil {
		return nil, fmt.Errorf("EC2 emulator: %w", err)
	}
	server := httptest.NewServer(emu.Handler())
	teardown := func() {
		server.Close()
		_ = emu.Close()
	}
	testEC2, err = cloud.NewEC2Client(ctx, cloud.Config{
		Region: testRegion, Endpoint: server.URL,
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		RetryMaxAttempts: 2, RetryMaxBackoff: time.Millisecond,
	})
	if err != nil {
		return teardown, fmt.Errorf("EC2 client: %w", err)
	}
	if testProvider, err = cloud.New(cloud.Options{EC2: testEC2, Region: testRegion}); err != nil {
		return teardown, fmt.Errorf("EC2 provider: %w", err)
	}
	return teardown, nil
}

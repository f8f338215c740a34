package millwright

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/cloud"
)

// unreachable is where the clients point: New must not call any server.
const unreachable = "http://127.0.0.1:1"

// validConfig has real clients for servers that do not exist.
func validConfig(t *testing.T) Config {
	t.Helper()
	restConfig := &rest.Config{Host: unreachable}
	clientset, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	dynamicClient, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	ec2Client, err := cloud.NewEC2Client(context.Background(), cloud.Config{
		Region: "us-east-1", Endpoint: unreachable, Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	temporalClient, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(temporalClient.Close)
	return Config{
		Cluster: cloud.ClusterInfo{Name: "c1"}, Region: "us-east-1",
		Kubernetes: clientset, Dynamic: dynamicClient, EC2: ec2Client, Temporal: temporalClient,
	}
}

// Every activity of the contract registers under its name: the SDK checks
// each method's signature at registration.
func TestEveryActivityRegisters(t *testing.T) {
	a, err := New(validConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	activities.Register(env, a)
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{name: "no cluster name", mutate: func(c *Config) { c.Cluster.Name = "" }, want: "Cluster.Name"},
		{name: "no region", mutate: func(c *Config) { c.Region = "" }, want: "Region"},
		{name: "no Kubernetes client", mutate: func(c *Config) { c.Kubernetes = nil }, want: "Kubernetes"},
		{name: "no EC2 client", mutate: func(c *Config) { c.EC2 = nil }, want: "EC2"},
		{name: "no Temporal client", mutate: func(c *Config) { c.Temporal = nil }, want: "Temporal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig(t)
			tc.mutate(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

package cloud

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/awsemu"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
)

const (
	testRegion  = "us-east-1"
	testCluster = "c1"
	testRole    = "MillwrightNodeRole"
	// discoveryTag is what the emulator tags its subnets and node security
	// group with (default cluster name "millwright").
	discoveryTagKey   = "millwright.dev/discovery"
	discoveryTagValue = "millwright"
)

// testStart is a fixed instant, so runs are repeatable.
var testStart = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// nodeRecorder is the emulator's kubelet hook: it keeps the Nodes booted
// instances would register, built from their userData.
type nodeRecorder struct {
	mu    sync.Mutex
	nodes map[string]*corev1.Node
}

func (r *nodeRecorder) Register(_ context.Context, node *corev1.Node) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes[node.Spec.ProviderID] = node.DeepCopy()
	return nil
}

func (r *nodeRecorder) Deregister(context.Context, string) error { return nil }

func (r *nodeRecorder) byProviderID(id string) (*corev1.Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.nodes[id]
	return n, ok
}

// fixture is the emulator served over HTTP, a real SDK client pointed at it
// and a Provider using that client. The emulator and the provider have
// separate fake clocks, so the provider's timers are the only waiters on
// its clock.
type fixture struct {
	t           *testing.T
	emu         *awsemu.Emulator
	emuClock    *clocktesting.FakeClock
	clock       *clocktesting.FakeClock
	ec2         *ec2.Client
	iam         *iam.Client
	provider    *Provider
	nodes       *nodeRecorder
	nodeClasses map[string]*apisv1.EC2NodeClass
}

type fixtureOption func(*fixtureConfig)

type fixtureConfig struct {
	clientConfig Config
	options      Options
}

func withClientConfig(mutate func(*Config)) fixtureOption {
	return func(c *fixtureConfig) { mutate(&c.clientConfig) }
}

func withProviderOptions(mutate func(*Options)) fixtureOption {
	return func(c *fixtureConfig) { mutate(&c.options) }
}

func newFixture(t *testing.T, opts ...fixtureOption) *fixture {
	t.Helper()
	f := &fixture{
		t:           t,
		emuClock:    clocktesting.NewFakeClock(testStart),
		clock:       clocktesting.NewFakeClock(testStart),
		nodes:       &nodeRecorder{nodes: map[string]*corev1.Node{}},
		nodeClasses: map[string]*apisv1.EC2NodeClass{"default": testNodeClass()},
	}
	emu, err := awsemu.New(awsemu.Options{Clock: f.emuClock, Registrar: f.nodes, Roles: []string{testRole, testRole + "-v2"}, Logger: zaptest.NewLogger(t).Named("awsemu")})
	if err != nil {
		t.Fatal(err)
	}
	f.emu = emu
	server := httptest.NewServer(emu.Handler())
	t.Cleanup(func() {
		server.Close()
		_ = emu.Close()
	})

	cfg := fixtureConfig{
		clientConfig: Config{
			Region:      testRegion,
			Endpoint:    server.URL,
			Credentials: staticCredentials(),
			// The SDK's retry count, with backoffs too short to wait on real
			// time. Retries matter even against the emulator: on a loaded
			// machine the transport sometimes loses a connection mid-response
			// (aws-sdk-go-v2#2737), which the SDK retries as it would on AWS.
			RetryMaxBackoff: time.Millisecond,
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	client, err := NewEC2Client(context.Background(), cfg.clientConfig)
	if err != nil {
		t.Fatal(err)
	}
	f.ec2 = client
	if f.iam, err = NewIAMClient(context.Background(), cfg.clientConfig); err != nil {
		t.Fatal(err)
	}
	ssmClient, err := NewSSMClient(context.Background(), cfg.clientConfig)
	if err != nil {
		t.Fatal(err)
	}
	options := cfg.options
	options.EC2 = client
	options.IAM = f.iam
	options.SSM = ssmClient
	options.Region = testRegion
	options.Clock = f.clock
	options.Logger = zaptest.NewLogger(t)
	options.Cluster = ClusterInfo{
		Name: testCluster, Endpoint: "https://127.0.0.1:6443",
		CertificateAuthority: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
		ServiceCIDR:          "10.96.0.0/12",
	}
	options.NodeClasses = NodeClassGetterFunc(func(_ context.Context, name string) (*apisv1.EC2NodeClass, error) {
		nc, ok := f.nodeClasses[name]
		if !ok {
			return nil, apierrors.NewNotFound(apisv1.Resource("ec2nodeclasses"), name)
		}
		return nc, nil
	})
	provider, err := New(options)
	if err != nil {
		t.Fatal(err)
	}
	f.provider = provider
	return f
}

// testNodeClass selects the emulator's discovery-tagged subnets and node
// security group and the latest AL2023 EKS AMIs.
func testNodeClass(mutators ...func(*apisv1.EC2NodeClass)) *apisv1.EC2NodeClass {
	nc := &apisv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: apisv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []apisv1.SubnetSelectorTerm{{Tags: map[string]string{discoveryTagKey: discoveryTagValue}}},
			SecurityGroupSelectorTerms: []apisv1.SecurityGroupSelectorTerm{{Tags: map[string]string{discoveryTagKey: discoveryTagValue}}},
			AMISelectorTerms:           []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       testRole,
			Tags:                       map[string]string{"team": "platform"},
		},
	}
	for _, m := range mutators {
		m(nc)
	}
	return nc
}

// option builds a launch option for an instance type with the provider's
// own offerings (emulator spot prices, catalog on-demand prices), keeping
// the given capacity types (all when none given), cheapest first.
func (f *fixture) option(name string, capacityTypes ...string) activities.InstanceTypeOption {
	f.t.Helper()
	types, err := f.provider.InstanceTypes.List(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	keep := map[string]bool{}
	for _, ct := range capacityTypes {
		keep[ct] = true
	}
	for _, it := range types {
		if it.Name != name {
			continue
		}
		option := activities.InstanceTypeOption{Name: name}
		for _, o := range it.Offerings {
			if len(keep) == 0 || keep[o.CapacityType] {
				option.Offerings = append(option.Offerings, activities.Offering{Zone: o.Zone, CapacityType: o.CapacityType, PricePerHour: o.Price})
			}
		}
		return option
	}
	f.t.Fatalf("instance type %s not listed", name)
	return activities.InstanceTypeOption{}
}

// launchRequest is the request a node workflow would send for these options.
func launchRequest(nodeClaim string, options ...activities.InstanceTypeOption) activities.LaunchRequest {
	workflowID := "node/" + testCluster + "/" + nodeClaim
	return activities.LaunchRequest{
		Cluster:       testCluster,
		NodeClaimName: nodeClaim,
		NodePool:      "default",
		NodeClassName: "default",
		WorkflowID:    workflowID,
		ClientToken:   activities.LaunchClientToken(workflowID, options),
		Options:       options,
		Labels:        map[string]string{"team": "a", "node-role.kubernetes.io/worker": ""},
		Taints:        []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}},
		StartupTaints: []corev1.Taint{{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute}},
	}
}

// catalogSpec returns the embedded catalog's row.
func catalogSpec(t *testing.T, name string) catalog.InstanceTypeSpec {
	t.Helper()
	spec, ok := catalog.MustDefault().Get(name)
	if !ok {
		t.Fatalf("%s is not in the catalog", name)
	}
	return spec
}

// liveInstances returns the emulator's instances that are not terminated.
func (f *fixture) liveInstances() []awsemu.InstanceState {
	return f.emu.State().LiveInstances()
}

func staticCredentials() credentials.StaticCredentialsProvider {
	return credentials.NewStaticCredentialsProvider("test", "test", "")
}

// throttleAll makes every EC2 call answer RequestLimitExceeded.
func throttleAll(actions ...string) awsemu.ThrottleFault {
	return awsemu.ThrottleFault{EveryN: 1, Actions: actions}
}

func ptrTo[T any](v T) *T { return &v }

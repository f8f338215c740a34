package cloud

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/events"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/scheduling"
)

// Tags Millwright puts on instances besides the apis/v1 ones (nodepool,
// nodeclaim, ec2nodeclass) and the kubernetes.io/cluster/<name> ownership
// tag.
const (
	// TagCluster names the cluster an instance belongs to.
	TagCluster = apisv1.Group + "/cluster"
	// TagWorkflowID names the node workflow that owns an instance.
	TagWorkflowID = apisv1.Group + "/workflow-id"
	// TagName is the EC2 console's name tag.
	TagName = "Name"
)

// Defaults of Options.
const (
	// DefaultTerminationPollInterval is how often WaitForInstanceTerminated
	// asks EC2.
	DefaultTerminationPollInterval = 5 * time.Second
	// DefaultMaxInstanceTypes bounds the instance types of one CreateFleet
	// (Karpenter's limit; types × subnets must stay within EC2 Fleet's
	// override limits).
	DefaultMaxInstanceTypes = 60
)

// ClusterInfo is what userData needs to join nodes to the cluster.
type ClusterInfo struct {
	Name string
	// Endpoint is the API server's https URL.
	Endpoint string
	// CertificateAuthority is the cluster CA bundle (PEM).
	CertificateAuthority []byte
	// ServiceCIDR is the cluster's service IP range.
	ServiceCIDR string
	// ClusterDNS, when set, is the kubelet's clusterDNS (else nodeadm
	// derives it from ServiceCIDR).
	ClusterDNS []string
	// KubernetesVersion ("1.33") narrows alias AMIs to that version.
	KubernetesVersion string
}

// Options configures a Provider.
type Options struct {
	// EC2 is the EC2 client (NewEC2Client), required.
	EC2 EC2API
	// Pricing is the Pricing API client (NewPricingClient); nil uses the
	// catalog's on-demand prices.
	Pricing PricingAPI
	// SSM (NewSSMClient) reads ssmParameter AMI selector terms; nil refuses
	// them with a message naming the term.
	SSM SSMAPI
	// IAM (NewIAMClient) manages the instance profiles of classes that name
	// a role; nil refuses spec.role with a message naming it.
	IAM IAMAPI
	// Region is the cluster's region (for on-demand prices).
	Region  string
	Cluster ClusterInfo
	// NodeClasses reads EC2NodeClasses, required for Launch.
	NodeClasses NodeClassGetter
	// Catalog defaults to catalog.Default().
	Catalog *catalog.Catalog
	// Clock drives caches and polling; default the real clock.
	Clock  clock.WithTicker
	Logger *zap.Logger
	// Events publishes the NodePool warnings of launches EC2 rejects;
	// default events.Discard.
	Events events.Recorder

	InstanceTypesTTL  time.Duration
	SpotPricesTTL     time.Duration
	OnDemandPricesTTL time.Duration
	PricingRetryAfter time.Duration
	NodeClassTTL      time.Duration

	TerminationPollInterval time.Duration
	MaxInstanceTypes        int
}

// Provider is Millwright's EC2 side: the Launch, TerminateInstance and
// WaitForInstanceTerminated activities (its methods match
// activities.NodeActivities, so the worker composes it with the Kubernetes
// activities), and the instance types, NodeClass resolution and
// unavailable offerings the planner reads.
type Provider struct {
	InstanceTypes *InstanceTypeProvider
	NodeClasses   *NodeClassResolver
	Unavailable   *UnavailableOfferings
	// InstanceProfiles is nil without an IAM client.
	InstanceProfiles *InstanceProfileManager

	ec2         EC2API
	nodeClasses NodeClassGetter
	cluster     ClusterInfo
	clock       clock.WithTicker
	log         *zap.Logger
	events      events.Recorder

	pollInterval     time.Duration
	maxInstanceTypes int
}

// New builds a Provider.
func New(opts Options) (*Provider, error) {
	if opts.EC2 == nil {
		return nil, errors.New("cloud provider: EC2 client is nil")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Events == nil {
		opts.Events = events.Discard
	}
	if opts.TerminationPollInterval <= 0 {
		opts.TerminationPollInterval = DefaultTerminationPollInterval
	}
	if opts.MaxInstanceTypes <= 0 {
		opts.MaxInstanceTypes = DefaultMaxInstanceTypes
	}
	unavailable := NewUnavailableOfferings(opts.Clock, opts.Logger)
	types, err := NewInstanceTypeProvider(InstanceTypeProviderOptions{
		EC2: opts.EC2, Pricing: opts.Pricing, Region: opts.Region, Catalog: opts.Catalog,
		Unavailable: unavailable, Clock: opts.Clock, Logger: opts.Logger,
		InstanceTypesTTL: opts.InstanceTypesTTL, SpotPricesTTL: opts.SpotPricesTTL,
		OnDemandPricesTTL: opts.OnDemandPricesTTL, PricingRetryAfter: opts.PricingRetryAfter,
	})
	if err != nil {
		return nil, err
	}
	var profiles *InstanceProfileManager
	if opts.IAM != nil {
		profiles = NewInstanceProfileManager(opts.IAM, opts.EC2, opts.Cluster.Name, opts.Region, opts.Logger)
	}
	resolver, err := NewNodeClassResolver(NodeClassResolverOptions{
		EC2: opts.EC2, SSM: opts.SSM, InstanceProfiles: profiles, KubernetesVersion: opts.Cluster.KubernetesVersion,
		Clock: opts.Clock, Logger: opts.Logger, TTL: opts.NodeClassTTL,
	})
	if err != nil {
		return nil, err
	}
	return &Provider{
		InstanceTypes: types, NodeClasses: resolver, Unavailable: unavailable, InstanceProfiles: profiles,
		ec2: opts.EC2, nodeClasses: opts.NodeClasses, cluster: opts.Cluster,
		clock: opts.Clock, log: opts.Logger.Named("cloud"), events: opts.Events,
		pollInterval: opts.TerminationPollInterval, maxInstanceTypes: opts.MaxInstanceTypes,
	}, nil
}

// InstanceTypesForNodeClass lists the instance types with offerings in the
// zones of the class's subnets: what a NodePool using the class can launch.
func (p *Provider) InstanceTypesForNodeClass(ctx context.Context, nc *apisv1.EC2NodeClass) ([]*catalog.InstanceType, error) {
	resolved, err := p.NodeClasses.Resolve(ctx, nc)
	if err != nil {
		return nil, err
	}
	types, err := p.InstanceTypes.ListInZones(ctx, resolved.Zones())
	if err != nil {
		return nil, err
	}
	if resolved.IsWindows() {
		types = windowsInstanceTypes(types, resolved.AMIFamily)
	}
	return p.withKubelet(ctx, nc, types)
}

// WindowsBuilds are the node.kubernetes.io/windows-build of the Windows
// AMI families' nodes.
var WindowsBuilds = map[string]string{
	apisv1.AMIFamilyWindows2019: "10.0.17763",
	apisv1.AMIFamilyWindows2022: "10.0.20348",
	apisv1.AMIFamilyWindows2025: "10.0.26100",
}

// windowsInstanceTypes are the types as a Windows class launches them: the
// amd64 ones (EKS publishes no arm64 Windows AMI), labelled
// kubernetes.io/os=windows and with the family's Windows build, so pods
// selecting Windows are planned onto this class's pools and Linux pods are
// not. The listed types are copies; the shared ones are not changed.
func windowsInstanceTypes(types []*catalog.InstanceType, family string) []*catalog.InstanceType {
	out := make([]*catalog.InstanceType, 0, len(types))
	for _, it := range types {
		if it.Labels[scheduling.LabelArch] != "amd64" {
			continue
		}
		windows := *it
		windows.Labels = maps.Clone(it.Labels)
		windows.Labels[scheduling.LabelOS] = "windows"
		windows.Labels[corev1.LabelWindowsBuild] = WindowsBuilds[family]
		out = append(out, &windows)
	}
	return out
}

// activityAttempt is the current activity attempt (1 outside an activity),
// which scales the Throttled error's jittered retry delay.
func activityAttempt(ctx context.Context) int32 {
	if activity.IsActivity(ctx) {
		return activity.GetInfo(ctx).Attempt
	}
	return 1
}

// heartbeat records progress when running as an activity.
func heartbeat(ctx context.Context, details ...any) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, details...)
	}
}

// asActivityError prepares an error to leave an activity. Temporal reads an
// ApplicationError's type and retryability only when it is the returned
// error itself (not wrapped), so typed errors are unwrapped; AWS throttling
// that outlived the SDK's retries becomes the contract's Throttled error
// (retryable after a jittered delay); anything else is wrapped with the
// operation and stays retryable.
func asActivityError(ctx context.Context, operation string, err error) error {
	if err == nil {
		return nil
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr
	}
	if isThrottle(err) {
		return activities.NewThrottledError(operation, err, activityAttempt(ctx))
	}
	return fmt.Errorf("%s: %w", operation, err)
}

package awsemu

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// epoch is the fake clock's start: after the newer AMI release and before
// the older one's deprecation is irrelevant; tests that care step the clock.
var epoch = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// harness is an emulator on a fake clock behind an httptest server, with real
// SDK clients pointed at it through BaseEndpoint only.
type harness struct {
	t      *testing.T
	ctx    context.Context
	clock  *clocktesting.FakeClock
	emu    *Emulator
	server *httptest.Server
	ec2    *ec2.Client
	sqs    *sqs.Client
	nodes  *recordingRegistrar
	admin  *AdminClient
}

func newHarness(t *testing.T, configure ...func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, ctx: context.Background(), clock: clocktesting.NewFakeClock(epoch), nodes: newRecordingRegistrar()}
	opts := Options{Clock: h.clock, Registrar: h.nodes}
	for _, c := range configure {
		c(&opts)
	}
	emu, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.emu = emu
	h.server = httptest.NewServer(emu.Handler())
	t.Cleanup(func() {
		h.server.Close()
		_ = emu.Close()
	})
	h.ec2 = ec2.NewFromConfig(sdkConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(h.server.URL) })
	h.sqs = sqs.NewFromConfig(sdkConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(h.server.URL) })
	h.admin = NewAdminClient(h.server.URL, h.server.Client())
	return h
}

// sdkConfig is what a product process would have: a region and static
// credentials, plus two test-only settings:
//   - the HTTP client hides the request body's WriteTo (see
//     requestBodyWithoutWriteTo), which makes the SDK reliable against a
//     server as fast as this one;
//   - the retryer retries only connection errors, at once, so API errors
//     (throttling, insufficient capacity) reach the test on the first attempt.
func sdkConfig() aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEMULATOR", "secret", ""),
		HTTPClient:  requestBodyWithoutWriteTo{client: &http.Client{}},
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 3
				o.Retryables = []retry.IsErrorRetryable{retry.NoRetryCanceledError{}, retry.RetryableConnectionError{}}
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
				o.RateLimiter = ratelimit.None
			})
		},
	}
}

// requestBodyWithoutWriteTo works around a race between smithy-go and
// net/http (aws-sdk-go-v2#2737): the SDK closes the request body as soon as
// response headers arrive; when the server answers before the transport's
// write loop has made its final end-of-body check, that check goes through
// the closed body's WriteTo, which returns io.EOF, and the transport tears
// the connection down under the response being read ("use of closed network
// connection"). A local emulator answers fast enough to hit this often under
// load. Hiding WriteTo makes the check use Read, which reports a clean EOF.
type requestBodyWithoutWriteTo struct{ client *http.Client }

func (d requestBodyWithoutWriteTo) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = struct{ io.ReadCloser }{req.Body}
	}
	return d.client.Do(req)
}

// step advances the fake clock and applies what became due, including Node
// registrations, before returning.
func (h *harness) step(d time.Duration) {
	h.clock.Step(d)
	h.emu.Reconcile(h.ctx)
}

// apiErrorCode is the error code the SDK surfaces, or "" for nil.
func apiErrorCode(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error is not an API error: %v", err)
	}
	return apiErr.ErrorCode()
}

func (h *harness) image(arch string) string {
	h.t.Helper()
	out, err := h.ec2.DescribeImages(h.ctx, &ec2.DescribeImagesInput{
		Owners:  []string{"amazon"},
		Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-" + arch + "-standard-1.37-*"}}},
	})
	if err != nil || len(out.Images) == 0 {
		h.t.Fatalf("DescribeImages %s: %v (%d images)", arch, err, len(out.Images))
	}
	return aws.ToString(out.Images[0].ImageId)
}

func (h *harness) subnets() map[string]string {
	h.t.Helper()
	out, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{})
	if err != nil {
		h.t.Fatalf("DescribeSubnets: %v", err)
	}
	byZone := map[string]string{}
	for _, s := range out.Subnets {
		byZone[aws.ToString(s.AvailabilityZone)] = aws.ToString(s.SubnetId)
	}
	return byZone
}

// launchTemplate creates a template for arch with the given userData
// (base64) and returns its name.
func (h *harness) launchTemplate(name, arch, userData string) string {
	h.t.Helper()
	data := &ec2types.RequestLaunchTemplateData{ImageId: aws.String(h.image(arch))}
	if userData != "" {
		data.UserData = aws.String(userData)
	}
	if _, err := h.ec2.CreateLaunchTemplate(h.ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: data}); err != nil {
		h.t.Fatalf("CreateLaunchTemplate %s: %v", name, err)
	}
	return name
}

// runOne launches one on-demand instance with RunInstances.
func (h *harness) runOne(instanceType string, tags map[string]string) string {
	h.t.Helper()
	in := &ec2.RunInstancesInput{
		ImageId: aws.String(h.image("x86_64")), InstanceType: ec2types.InstanceType(instanceType),
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
	}
	if len(tags) > 0 {
		in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: sdkTags(tags)}}
	}
	out, err := h.ec2.RunInstances(h.ctx, in)
	if err != nil {
		h.t.Fatalf("RunInstances: %v", err)
	}
	return aws.ToString(out.Instances[0].InstanceId)
}

func sdkTags(tags map[string]string) []ec2types.Tag {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []ec2types.Tag
	for _, k := range keys {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}

func (h *harness) instance(id string) ec2types.Instance {
	h.t.Helper()
	out, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		h.t.Fatalf("DescribeInstances %s: %v", id, err)
	}
	return out.Reservations[0].Instances[0]
}

// recordingRegistrar keeps the Nodes the emulator registers in memory. It
// stands in for the cluster in conformance tests; the client-go registrar is
// exercised against a real apiserver by the integration tests.
type recordingRegistrar struct {
	mu        sync.Mutex
	nodes     map[string]*corev1.Node
	deleted   []string
	failCalls int // fail this many Register calls before succeeding
}

func newRecordingRegistrar() *recordingRegistrar {
	return &recordingRegistrar{nodes: map[string]*corev1.Node{}}
}

func (r *recordingRegistrar) Register(_ context.Context, node *corev1.Node) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failCalls > 0 {
		r.failCalls--
		return errors.New("apiserver unavailable")
	}
	r.nodes[node.Name] = node.DeepCopy()
	return nil
}

func (r *recordingRegistrar) Deregister(_ context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.nodes, name)
	r.deleted = append(r.deleted, name)
	return nil
}

func (r *recordingRegistrar) node(name string) (*corev1.Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.nodes[name]
	return n, ok
}

func (r *recordingRegistrar) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.nodes)
}

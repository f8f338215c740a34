package awsemu

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
)

var (
	instanceIDFormat = regexp.MustCompile(`^i-[0-9a-f]{17}$`)
	privateIPFormat  = regexp.MustCompile(`^10\.0\.\d{1,3}\.\d{1,3}$`)
)

// al2023UserData is the kind of userData the product sends: a MIME document
// with a nodeadm NodeConfig asking for labels and taints.
func al2023UserData(labels, taints string) string {
	doc := `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: demo
    apiServerEndpoint: https://127.0.0.1:6443
    certificateAuthority: ` + base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----")) + `
    cidr: 10.96.0.0/12
  kubelet:
    config:
      maxPods: 29
    flags:
    - --node-labels=` + labels + `
    - --register-with-taints=` + taints + `

--//--
`
	return base64.StdEncoding.EncodeToString([]byte(doc))
}

func TestInstanceLifecycleRegistersAndDeletesTheNode(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.BootDelay = 10 * time.Second
		o.ShutdownDelay = 20 * time.Second
		o.NodeDeletionDelay = 30 * time.Second
	})
	lt := h.launchTemplate("nodes", "x86_64", al2023UserData(
		"millwright.dev/nodepool=default,team=a", "millwright.dev/unregistered=true:NoExecute,dedicated=gpu:NoSchedule"))
	out, err := h.ec2.RunInstances(h.ctx, &ec2.RunInstancesInput{
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
		InstanceType:   ec2types.InstanceTypeM5Large,
		Placement:      &ec2types.Placement{AvailabilityZone: aws.String("us-east-1b")},
		MinCount:       aws.Int32(1), MaxCount: aws.Int32(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	if !instanceIDFormat.MatchString(id) {
		t.Errorf("instance id %q is not i-<17 hex>", id)
	}

	launched := h.instance(id)
	ip := aws.ToString(launched.PrivateIpAddress)
	if !privateIPFormat.MatchString(ip) {
		t.Errorf("private IP %q is not 10.0.x.y", ip)
	}
	wantDNS := "ip-" + strings.ReplaceAll(ip, ".", "-") + ".ec2.internal"
	if got := aws.ToString(launched.PrivateDnsName); got != wantDNS {
		t.Errorf("private DNS %q, want %q", got, wantDNS)
	}
	if launched.State.Name != ec2types.InstanceStateNamePending || aws.ToInt32(launched.State.Code) != 0 {
		t.Errorf("new instance is %s/%d, want pending/0", launched.State.Name, aws.ToInt32(launched.State.Code))
	}

	h.step(9 * time.Second)
	if s := h.instance(id).State.Name; s != ec2types.InstanceStateNamePending {
		t.Fatalf("before the boot delay: %s", s)
	}
	if h.nodes.count() != 0 {
		t.Fatal("a Node was registered before the instance ran")
	}
	h.step(time.Second)
	if s := h.instance(id).State; s.Name != ec2types.InstanceStateNameRunning || aws.ToInt32(s.Code) != 16 {
		t.Fatalf("after the boot delay: %s/%d", s.Name, aws.ToInt32(s.Code))
	}
	node, ok := h.nodes.node(wantDNS)
	if !ok {
		t.Fatalf("no Node %s registered", wantDNS)
	}
	checkNode(t, node, id, "us-east-1b", map[string]string{
		"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": wantDNS,
		"node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1b",
		"topology.kubernetes.io/region": "us-east-1", LabelCapacityType: "on-demand",
		"millwright.dev/nodepool": "default", "team": "a",
	}, []corev1.Taint{
		{Key: "millwright.dev/unregistered", Value: "true", Effect: corev1.TaintEffectNoExecute},
		{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
	})
	if pods := node.Status.Capacity[corev1.ResourcePods]; pods.Value() != 29 {
		t.Errorf("pods capacity %s, want the userData's maxPods 29", pods.String())
	}

	term, err := h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	change := term.TerminatingInstances[0]
	if change.PreviousState.Name != ec2types.InstanceStateNameRunning || change.CurrentState.Name != ec2types.InstanceStateNameShuttingDown {
		t.Errorf("terminate: %s → %s, want running → shutting-down", change.PreviousState.Name, change.CurrentState.Name)
	}
	h.step(20 * time.Second)
	terminated := h.instance(id)
	if terminated.State.Name != ec2types.InstanceStateNameTerminated || aws.ToString(terminated.StateReason.Code) != "Client.UserInitiatedShutdown" {
		t.Fatalf("after the shutdown delay: %s (%v)", terminated.State.Name, terminated.StateReason)
	}
	if _, ok := h.nodes.node(wantDNS); !ok {
		t.Fatal("the Node was deleted before the node deletion delay")
	}
	h.step(30 * time.Second)
	if _, ok := h.nodes.node(wantDNS); ok {
		t.Fatal("the Node is still there after the node deletion delay")
	}

	// Terminating again is a no-op; after an hour EC2 forgets the instance.
	if _, err := h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Errorf("terminating a terminated instance: %v", err)
	}
	h.step(time.Hour)
	_, err = h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if code := apiErrorCode(t, err); code != "InvalidInstanceID.NotFound" {
		t.Errorf("an hour after termination: error %q, want InvalidInstanceID.NotFound", code)
	}
	if st, _ := h.emu.State().Instance(id); st.State != "terminated" || !st.NodeDeleted {
		t.Errorf("state dump keeps the instance: %+v", st)
	}
}

func checkNode(t *testing.T, node *corev1.Node, instanceID, zone string, labels map[string]string, taints []corev1.Taint) {
	t.Helper()
	if want := fmt.Sprintf("aws:///%s/%s", zone, instanceID); node.Spec.ProviderID != want {
		t.Errorf("providerID %q, want %q", node.Spec.ProviderID, want)
	}
	for k, v := range labels {
		if node.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, node.Labels[k], v)
		}
	}
	if len(node.Spec.Taints) != len(taints) {
		t.Errorf("taints %v, want %v", node.Spec.Taints, taints)
	} else {
		for i := range taints {
			if node.Spec.Taints[i] != taints[i] {
				t.Errorf("taint %d: %v, want %v", i, node.Spec.Taints[i], taints[i])
			}
		}
	}
	if node.Annotations[AnnotationKwokNode] != "fake" {
		t.Errorf("annotation %s=%q, want fake", AnnotationKwokNode, node.Annotations[AnnotationKwokNode])
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
		c, a := node.Status.Capacity[r], node.Status.Allocatable[r]
		if c.IsZero() || a.IsZero() || a.Cmp(c) > 0 {
			t.Errorf("%s: capacity %s allocatable %s", r, c.String(), a.String())
		}
	}
}

func TestNodeRegistrationRetriesUntilTheAPIAnswers(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.BootDelay = time.Second; o.NodeRegistrationRetry = 5 * time.Second })
	h.nodes.failCalls = 2
	id := h.runOne("m5.large", nil)
	name := aws.ToString(h.instance(id).PrivateDnsName)
	for i, want := range []bool{false, false, true} {
		if i == 0 {
			h.step(time.Second)
		} else {
			h.step(5 * time.Second)
		}
		if _, ok := h.nodes.node(name); ok != want {
			t.Fatalf("attempt %d: registered=%v, want %v", i+1, ok, want)
		}
	}
	if st, _ := h.emu.State().Instance(id); !st.NodeRegistered || st.NodeRegistrationError != "" {
		t.Errorf("state after success: %+v", st)
	}
}

func TestUnreadableUserDataMeansTheNodeNeverJoins(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.BootDelay = time.Second })
	bad := base64.StdEncoding.EncodeToString([]byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n    - --node-labels=Bad Label=x\n"))
	lt := h.launchTemplate("bad-userdata", "x86_64", bad)
	out, err := h.ec2.RunInstances(h.ctx, &ec2.RunInstancesInput{
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(lt)},
		InstanceType:   ec2types.InstanceTypeM5Large, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.step(time.Second)
	st, _ := h.emu.State().Instance(aws.ToString(out.Instances[0].InstanceId))
	if st.State != "running" || st.NodeRegistered || !strings.Contains(st.NodeRegistrationError, "Bad Label") {
		t.Errorf("instance with bad userData: %+v", st)
	}
	if h.nodes.count() != 0 {
		t.Error("a Node was registered from unreadable userData")
	}
}

func TestRunInstancesClientToken(t *testing.T) {
	h := newHarness(t)
	run := func(token string, instanceType ec2types.InstanceType) (*ec2.RunInstancesOutput, error) {
		return h.ec2.RunInstances(h.ctx, &ec2.RunInstancesInput{
			ImageId: aws.String(h.image("x86_64")), InstanceType: instanceType,
			MinCount: aws.Int32(2), MaxCount: aws.Int32(2), ClientToken: aws.String(token),
		})
	}
	first, err := run("token-1", ec2types.InstanceTypeM5Large)
	if err != nil {
		t.Fatal(err)
	}
	again, err := run("token-1", ec2types.InstanceTypeM5Large)
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(first.ReservationId) != aws.ToString(again.ReservationId) || len(again.Instances) != 2 ||
		aws.ToString(first.Instances[0].InstanceId) != aws.ToString(again.Instances[0].InstanceId) ||
		aws.ToString(first.Instances[1].InstanceId) != aws.ToString(again.Instances[1].InstanceId) {
		t.Errorf("same token, same parameters: %v vs %v", ids(first.Instances), ids(again.Instances))
	}
	if aws.ToString(again.Instances[0].ClientToken) != "token-1" {
		t.Errorf("instance client token %q", aws.ToString(again.Instances[0].ClientToken))
	}
	_, err = run("token-1", ec2types.InstanceTypeM5Xlarge)
	if code := apiErrorCode(t, err); code != "IdempotentParameterMismatch" {
		t.Errorf("same token, other parameters: %q, want IdempotentParameterMismatch", code)
	}
	if live := h.emu.State().LiveInstances(); len(live) != 2 {
		t.Errorf("%d live instances, want 2", len(live))
	}
}

func ids(instances []ec2types.Instance) []string {
	var out []string
	for _, i := range instances {
		out = append(out, aws.ToString(i.InstanceId))
	}
	return out
}

func TestDescribeInstancesFiltersAndPagination(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.BootDelay = time.Minute })
	var blue, green []string
	for i := 0; i < 7; i++ {
		blue = append(blue, h.runOne("m5.large", map[string]string{"team": "blue", "index": fmt.Sprint(i)}))
	}
	for i := 0; i < 5; i++ {
		green = append(green, h.runOne("c5.large", map[string]string{"team": "green"}))
	}
	if _, err := h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: green[:2]}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		filters []ec2types.Filter
		want    []string
	}{
		{name: "all", want: append(append([]string{}, blue...), green...)},
		{name: "tag:team", filters: []ec2types.Filter{{Name: aws.String("tag:team"), Values: []string{"green"}}}, want: green},
		{name: "tag-key", filters: []ec2types.Filter{{Name: aws.String("tag-key"), Values: []string{"index"}}}, want: blue},
		{name: "tag value wildcard", filters: []ec2types.Filter{{Name: aws.String("tag:team"), Values: []string{"bl*"}}}, want: blue},
		{name: "instance-state-name", filters: []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}},
			want: append(append([]string{}, blue...), green[2:]...)},
		{name: "instance-id", filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: []string{blue[3], green[4]}}}, want: []string{blue[3], green[4]}},
		{name: "filters are ANDed", filters: []ec2types.Filter{
			{Name: aws.String("tag:team"), Values: []string{"green"}},
			{Name: aws.String("instance-state-name"), Values: []string{"shutting-down"}},
		}, want: green[:2]},
		{name: "instance-type", filters: []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"c5.large"}}}, want: green},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			pages := 0
			p := ec2.NewDescribeInstancesPaginator(h.ec2, &ec2.DescribeInstancesInput{Filters: tc.filters, MaxResults: aws.Int32(5)})
			for p.HasMorePages() {
				out, err := p.NextPage(h.ctx)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				n := 0
				for _, r := range out.Reservations {
					n += len(r.Instances)
					got = append(got, ids(r.Instances)...)
				}
				if n > 5 {
					t.Errorf("page of %d instances > MaxResults 5", n)
				}
			}
			if !equalStrings(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if wantPages := max(1, (len(tc.want)+4)/5); pages != wantPages {
				t.Errorf("%d pages, want %d", pages, wantPages)
			}
		})
	}
}

func TestInstanceErrors(t *testing.T) {
	h := newHarness(t)
	missing := "i-0123456789abcdef0"
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"describe unknown id", func() error {
			_, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{missing}})
			return err
		}, "InvalidInstanceID.NotFound"},
		{"terminate unknown id", func() error {
			_, err := h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{missing}})
			return err
		}, "InvalidInstanceID.NotFound"},
		{"malformed id", func() error {
			_, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"instance-1"}})
			return err
		}, "InvalidInstanceID.Malformed"},
		{"ids with MaxResults", func() error {
			_, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{missing}, MaxResults: aws.Int32(5)})
			return err
		}, "InvalidParameterCombination"},
		{"tag unknown instance", func() error {
			_, err := h.ec2.CreateTags(h.ctx, &ec2.CreateTagsInput{Resources: []string{missing}, Tags: sdkTags(map[string]string{"a": "b"})})
			return err
		}, "InvalidInstanceID.NotFound"},
		{"unknown image", func() error {
			_, err := h.ec2.RunInstances(h.ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-00000000000000000"), InstanceType: "m5.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
			return err
		}, "InvalidAMIID.NotFound"},
		{"arm64 image on an x86 type", func() error {
			_, err := h.ec2.RunInstances(h.ctx, &ec2.RunInstancesInput{ImageId: aws.String(h.image("arm64")), InstanceType: "m5.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
			return err
		}, "InvalidParameterValue"},
		{"unknown subnet", func() error {
			_, err := h.ec2.RunInstances(h.ctx, &ec2.RunInstancesInput{ImageId: aws.String(h.image("x86_64")), InstanceType: "m5.large", SubnetId: aws.String("subnet-0000"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
			return err
		}, "InvalidSubnetID.NotFound"},
		{"reserved tag key", func() error {
			_, err := h.ec2.RunInstances(h.ctx, &ec2.RunInstancesInput{ImageId: aws.String(h.image("x86_64")), InstanceType: "m5.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
				TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: sdkTags(map[string]string{"aws:x": "y"})}}})
			return err
		}, "InvalidParameterValue"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if code := apiErrorCode(t, tc.call()); code != tc.want {
				t.Errorf("error code %q, want %q", code, tc.want)
			}
		})
	}
	if live := h.emu.State().LiveInstances(); len(live) != 0 {
		t.Errorf("failed calls left %d instances", len(live))
	}
}

func TestCreateTags(t *testing.T) {
	h := newHarness(t)
	id := h.runOne("m5.large", map[string]string{"a": "1"})
	if _, err := h.ec2.CreateTags(h.ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: sdkTags(map[string]string{"a": "2", "b": "3"})}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tag := range h.instance(id).Tags {
		got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	if got["a"] != "2" || got["b"] != "3" {
		t.Errorf("tags %v", got)
	}
}

func TestThrottling(t *testing.T) {
	t.Run("every Nth call", func(t *testing.T) {
		h := newHarness(t)
		if err := h.admin.SetThrottle(h.ctx, ThrottleFault{EveryN: 3, Actions: []string{"DescribeInstances"}}); err != nil {
			t.Fatal(err)
		}
		var codes []string
		for i := 0; i < 6; i++ {
			_, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{})
			codes = append(codes, apiErrorCode(t, err))
		}
		if want := []string{"", "", "RequestLimitExceeded", "", "", "RequestLimitExceeded"}; !equalStrings(codes, want) {
			t.Errorf("codes %q, want %q", codes, want)
		}
		if _, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{}); err != nil {
			t.Errorf("an action outside the fault was throttled: %v", err)
		}
		if err := h.admin.ClearThrottle(h.ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("rate is repeatable with a seed", func(t *testing.T) {
		pattern := func() []string {
			h := newHarness(t)
			if err := h.emu.SetThrottle(ThrottleFault{Rate: 0.5, Seed: 42}); err != nil {
				t.Fatal(err)
			}
			var codes []string
			for i := 0; i < 20; i++ {
				_, err := h.ec2.DescribeAvailabilityZones(h.ctx, &ec2.DescribeAvailabilityZonesInput{})
				codes = append(codes, apiErrorCode(t, err))
			}
			return codes
		}
		a, b := pattern(), pattern()
		throttled := 0
		for _, c := range a {
			if c == "RequestLimitExceeded" {
				throttled++
			}
		}
		if !equalStrings(a, b) || throttled == 0 || throttled == 20 {
			t.Errorf("patterns %q and %q (%d throttled)", a, b, throttled)
		}
	})
}

// gatheringRegistrar registers a Node only once want registrations are in
// flight together, as the kubelets of instances booted at once do; a
// registrar called one Node at a time times out.
type gatheringRegistrar struct {
	*recordingRegistrar
	want     int
	mu       sync.Mutex
	arrived  int
	together chan struct{}
}

func (g *gatheringRegistrar) Register(ctx context.Context, node *corev1.Node) error {
	g.mu.Lock()
	g.arrived++
	if g.arrived == g.want {
		close(g.together)
	}
	g.mu.Unlock()
	select {
	case <-g.together:
	case <-time.After(10 * time.Second):
		return errors.New("registrations came one at a time")
	}
	return g.recordingRegistrar.Register(ctx, node)
}

// Instances that boot together register their Nodes concurrently, not one
// after another behind one client.
func TestInstancesBootedTogetherRegisterConcurrently(t *testing.T) {
	const instances = 8
	registrar := &gatheringRegistrar{recordingRegistrar: newRecordingRegistrar(), want: instances, together: make(chan struct{})}
	h := newHarness(t, func(o *Options) { o.BootDelay = time.Second; o.Registrar = registrar })
	for range instances {
		h.runOne("m5.large", nil)
	}

	h.step(time.Second)

	if got := registrar.count(); got != instances {
		t.Fatalf("%d Nodes registered, want %d", got, instances)
	}
}

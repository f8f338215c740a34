package activities

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
)

func TestOptionalDurationJSON(t *testing.T) {
	cases := []struct {
		name     string
		value    OptionalDuration
		encoded  string
		disabled bool
	}{
		{name: "never is the zero value", value: OptionalDuration{}, encoded: `"Never"`, disabled: true},
		{name: "explicit never", value: Never(), encoded: `"Never"`, disabled: true},
		{name: "thirty seconds", value: After(30 * time.Second), encoded: `"30s"`},
		{name: "zero is enabled, not never", value: After(0), encoded: `"0s"`},
		{name: "thirty days", value: After(720 * time.Hour), encoded: `"720h0m0s"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.Marshal(tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tc.encoded {
				t.Fatalf("encoded %s, want %s", data, tc.encoded)
			}
			var decoded OptionalDuration
			if err := json.Unmarshal(data, &decoded); err != nil {
				t.Fatal(err)
			}
			if decoded != tc.value {
				t.Fatalf("round trip gave %v, want %v", decoded, tc.value)
			}
			if decoded.IsNever() != tc.disabled {
				t.Fatalf("IsNever() = %v, want %v", decoded.IsNever(), tc.disabled)
			}
		})
	}
}

func TestOptionalDurationRejectsGarbage(t *testing.T) {
	for _, input := range []string{`"soon"`, `"-5s"`, `42`} {
		var d OptionalDuration
		if err := json.Unmarshal([]byte(input), &d); err == nil {
			t.Errorf("unmarshal %s: want an error, got %v", input, d)
		}
	}
}

func TestOptionalDurationInsideSpecOmittedIsNever(t *testing.T) {
	var spec NodeLaunchSpec
	if err := json.Unmarshal([]byte(`{"expireAfter":"24h"}`), &spec); err != nil {
		t.Fatal(err)
	}
	if d, ok := spec.ExpireAfter.Get(); !ok || d != 24*time.Hour {
		t.Fatalf("expireAfter = %v", spec.ExpireAfter)
	}
	if !spec.ConsolidateAfter.IsNever() || !spec.TerminationGracePeriod.IsNever() {
		t.Fatalf("omitted durations must be Never, got %v and %v", spec.ConsolidateAfter, spec.TerminationGracePeriod)
	}
}

func option(name string, zones ...string) InstanceTypeOption {
	o := InstanceTypeOption{Name: name}
	for _, z := range zones {
		o.Offerings = append(o.Offerings, Offering{Zone: z, CapacityType: CapacityTypeOnDemand, PricePerHour: 0.1})
	}
	return o
}

func TestLaunchClientToken(t *testing.T) {
	options := []InstanceTypeOption{option("m5.large", "us-east-1a", "us-east-1b"), option("m5.xlarge", "us-east-1a")}
	token := LaunchClientToken("node/c1/default-abc", options)
	if len(token) != 64 {
		t.Fatalf("token %q has %d characters; EC2 allows at most 64", token, len(token))
	}
	if again := LaunchClientToken("node/c1/default-abc", options); again != token {
		t.Fatalf("same launch gave a different token: %s vs %s", again, token)
	}
	differs := map[string]string{
		"other workflow":     LaunchClientToken("node/c1/default-xyz", options),
		"fewer options":      LaunchClientToken("node/c1/default-abc", options[:1]),
		"fewer offerings":    LaunchClientToken("node/c1/default-abc", []InstanceTypeOption{option("m5.large", "us-east-1b"), options[1]}),
		"options reordered":  LaunchClientToken("node/c1/default-abc", []InstanceTypeOption{options[1], options[0]}),
		"no options at all":  LaunchClientToken("node/c1/default-abc", nil),
		"name concatenation": LaunchClientToken("node/c1/default-ab", []InstanceTypeOption{option("cm5.large", "us-east-1a", "us-east-1b"), options[1]}),
	}
	for name, other := range differs {
		if other == token {
			t.Errorf("%s: token must differ", name)
		}
	}
}

func validSpec() NodeLaunchSpec {
	return NodeLaunchSpec{
		Cluster: "c1", NodeClaimName: "default-abc", NodePool: "default", NodeClassName: "default",
		InstanceTypeOptions: []InstanceTypeOption{option("m5.large", "us-east-1a")},
	}
}

func TestNodeLaunchSpecValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*NodeLaunchSpec)
		want   string
	}{
		{name: "valid", mutate: func(*NodeLaunchSpec) {}},
		{name: "no cluster", mutate: func(s *NodeLaunchSpec) { s.Cluster = "" }, want: "cluster is empty"},
		{name: "no node claim", mutate: func(s *NodeLaunchSpec) { s.NodeClaimName = "" }, want: "nodeClaimName is empty"},
		{name: "no pool", mutate: func(s *NodeLaunchSpec) { s.NodePool = "" }, want: "nodePool is empty"},
		{name: "no node class", mutate: func(s *NodeLaunchSpec) { s.NodeClassName = "" }, want: "nodeClassName is empty"},
		{name: "no options", mutate: func(s *NodeLaunchSpec) { s.InstanceTypeOptions = nil }, want: "instanceTypeOptions is empty"},
		{name: "unnamed option", mutate: func(s *NodeLaunchSpec) { s.InstanceTypeOptions[0].Name = "" }, want: "instanceTypeOptions[0].name is empty"},
		{name: "option without offerings", mutate: func(s *NodeLaunchSpec) { s.InstanceTypeOptions[0].Offerings = nil }, want: "instanceTypeOptions[0] (m5.large) has no offerings"},
		{name: "negative registration timeout", mutate: func(s *NodeLaunchSpec) { s.RegistrationTimeout = -time.Second }, want: "registrationTimeout -1s is negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := validSpec()
			tc.mutate(&spec)
			err := spec.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestTypedErrors(t *testing.T) {
	offerings := []OfferingKey{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: CapacityTypeSpot}}
	cases := []struct {
		name      string
		err       error
		is        func(error) bool
		retryable bool
	}{
		{name: "insufficient capacity", err: NewInsufficientCapacityError("no capacity", offerings), is: IsInsufficientCapacity},
		{name: "invalid node class", err: NewInvalidNodeClassError("default", "spec.subnetSelectorTerms", "matched no subnet"), is: IsInvalidNodeClass},
		{name: "throttled", err: NewThrottledError("CreateFleet", errors.New("RequestLimitExceeded"), 3), is: IsThrottled, retryable: true},
		{name: "registration timeout", err: NewRegistrationTimeoutError("i-1", "aws:///us-east-1a/i-1", 15*time.Minute), is: IsRegistrationTimeout},
		{name: "initialization timeout", err: NewInitializationTimeoutError("ip-10-0-0-1", "startup taint example.com/agent", time.Hour), is: IsInitializationTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wrapped := fmt.Errorf("activity failed: %w", tc.err)
			if !tc.is(wrapped) {
				t.Fatalf("Is… helper does not recognise a wrapped %s", tc.name)
			}
			var appErr *temporal.ApplicationError
			if !errors.As(tc.err, &appErr) {
				t.Fatal("not an ApplicationError")
			}
			if appErr.NonRetryable() == tc.retryable {
				t.Fatalf("NonRetryable() = %v, want %v", appErr.NonRetryable(), !tc.retryable)
			}
			for _, other := range cases {
				if other.name != tc.name && other.is(tc.err) {
					t.Errorf("%s is also recognised as %s", tc.name, other.name)
				}
			}
		})
	}
}

func TestInsufficientCapacityCarriesOfferings(t *testing.T) {
	want := []OfferingKey{
		{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: CapacityTypeSpot},
		{InstanceType: "m5.large", Zone: "us-east-1b", CapacityType: CapacityTypeSpot},
	}
	got, ok := InsufficientCapacityOfferings(fmt.Errorf("wrapped: %w", NewInsufficientCapacityError("ICE", want)))
	if !ok || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("offerings = %v (ok=%v), want %v", got, ok, want)
	}
	if _, ok := InsufficientCapacityOfferings(errors.New("plain")); ok {
		t.Fatal("a plain error is not InsufficientCapacity")
	}
}

func TestThrottledRetryDelayIsJitteredAndBounded(t *testing.T) {
	cases := []struct {
		attempt int32
		jitter  float64
		want    time.Duration
	}{
		{attempt: 1, jitter: 0.5, want: 500 * time.Millisecond},
		{attempt: 2, jitter: 0.5, want: time.Second},
		{attempt: 4, jitter: 0.25, want: 2 * time.Second},
		{attempt: 7, jitter: 0.5, want: 30 * time.Second},
		{attempt: 40, jitter: 0.999, want: time.Duration(0.999 * float64(time.Minute))},
		{attempt: 0, jitter: 0, want: 100 * time.Millisecond},
	}
	for _, tc := range cases {
		if got := ThrottledRetryDelay(tc.attempt, tc.jitter); got != tc.want {
			t.Errorf("ThrottledRetryDelay(%d, %v) = %s, want %s", tc.attempt, tc.jitter, got, tc.want)
		}
	}
}

package awsemu

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestCallFaults(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fault     CallFault
		wantError bool
		// wantInstances is how many instances exist after one RunInstances.
		wantInstances int
	}{
		{"an error fault fails the call without applying it", CallFault{Kind: CallFaultError, Rate: 1, Actions: []string{"RunInstances"}}, true, 0},
		{"a lost response applies the call and fails it", CallFault{Kind: CallFaultLostResponse, Rate: 1, Actions: []string{"RunInstances"}}, true, 1},
		{"a latency fault delays and applies", CallFault{Kind: CallFaultLatency, Rate: 1, Latency: Duration(time.Millisecond)}, false, 1},
		{"a held response applies and answers late", CallFault{Kind: CallFaultHoldResponse, Rate: 1, Latency: Duration(time.Millisecond)}, false, 1},
		{"another action's fault does not fire", CallFault{Kind: CallFaultError, Rate: 1, Actions: []string{"TerminateInstances"}}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if err := h.emu.SetCallFaults([]CallFault{tc.fault}); err != nil {
				t.Fatal(err)
			}
			_, err := h.ec2.RunInstances(h.ctx, &ec2.RunInstancesInput{
				ImageId: aws.String(h.image("x86_64")), InstanceType: ec2types.InstanceTypeM5Large,
				MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
			})
			if gotError := err != nil; gotError != tc.wantError {
				t.Errorf("RunInstances error %v, want an error: %v", err, tc.wantError)
			}
			if tc.wantError && apiErrorCode(t, err) != "InternalError" {
				t.Errorf("error code %s, want InternalError", apiErrorCode(t, err))
			}
			if n := len(h.emu.State().Instances); n != tc.wantInstances {
				t.Errorf("%d instances, want %d", n, tc.wantInstances)
			}
		})
	}
}

func TestCallFaultsAreValidatedAndCounted(t *testing.T) {
	h := newHarness(t)
	for _, bad := range []CallFault{
		{Kind: "explode", Rate: 1},
		{Kind: CallFaultError, Rate: 0},
		{Kind: CallFaultLatency, Rate: 1},
		{Kind: CallFaultError, Rate: 1, Actions: []string{"NoSuchAction"}},
	} {
		if err := h.admin.SetCallFaults(h.ctx, []CallFault{bad}); err == nil {
			t.Errorf("call fault %+v was accepted", bad)
		}
	}
	if err := h.admin.SetCallFaults(h.ctx, []CallFault{{Kind: CallFaultError, Rate: 1, Actions: []string{"DescribeInstances"}}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, _ = h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{})
	}
	f, err := h.admin.Faults(h.ctx)
	if err != nil || len(f.Calls) != 1 || f.Injected["error DescribeInstances"] != 2 {
		t.Fatalf("faults %+v %v, want one call fault that fired twice", f, err)
	}
	if err := h.admin.ClearCallFaults(h.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("DescribeInstances after clearing: %v", err)
	}
}

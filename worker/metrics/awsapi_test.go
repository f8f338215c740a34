package metrics

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/local/awsemu"
)

// TestAWSAPIOptionsRecordCallsAndErrorCodes drives a real EC2 client built
// the worker's way (cloud.NewEC2Client with the metrics middleware) against
// the EC2 emulator over HTTP.
func TestAWSAPIOptionsRecordCallsAndErrorCodes(t *testing.T) {
	emu, err := awsemu.New(awsemu.Options{Clock: clocktesting.NewFakeClock(time.Now()), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(emu.Handler())
	t.Cleanup(func() {
		server.Close()
		_ = emu.Close()
	})
	// DescribeInstances answers RequestLimitExceeded every time.
	if err := emu.SetThrottle(awsemu.ThrottleFault{EveryN: 1, Actions: []string{"DescribeInstances"}}); err != nil {
		t.Fatal(err)
	}
	m, _ := newTestMetrics(t)
	client, err := cloud.NewEC2Client(context.Background(), cloud.Config{
		Region: "us-east-1", Endpoint: server.URL,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		// Two attempts, backoffs too short to wait on: the middleware must
		// see one call, the retries inside it.
		RetryMaxAttempts: 2, RetryMaxBackoff: time.Millisecond,
		APIOptions: m.AWSAPIOptions(nil),
	})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := client.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatalf("DescribeSubnets: %v", err)
	}
	if _, err := client.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{}); err == nil {
		t.Fatal("DescribeInstances succeeded under a throttle fault")
	}

	if n := testutil.CollectAndCount(m.cloudDuration, "millwright_cloudprovider_duration_seconds"); n != 2 {
		t.Errorf("%d duration series, want 2 (DescribeSubnets, DescribeInstances)", n)
	}
	calls := func(operation string) uint64 {
		families, err := m.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, family := range families {
			if family.GetName() != "millwright_cloudprovider_duration_seconds" {
				continue
			}
			for _, metric := range family.GetMetric() {
				labels := map[string]string{}
				for _, l := range metric.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["service"] == "EC2" && labels["operation"] == operation {
					return metric.GetHistogram().GetSampleCount()
				}
			}
		}
		return 0
	}
	if got := calls("DescribeSubnets"); got != 1 {
		t.Errorf("DescribeSubnets calls = %d, want 1", got)
	}
	if got := calls("DescribeInstances"); got != 1 {
		t.Errorf("DescribeInstances calls = %d, want 1 (its retries inside)", got)
	}
	if got := testutil.ToFloat64(m.cloudErrors.WithLabelValues("EC2", "DescribeInstances", "", "DescribeInstances", "aws", "RequestLimitExceeded")); got != 1 {
		t.Errorf("errors{DescribeInstances, RequestLimitExceeded} = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.cloudErrors); n != 1 {
		t.Errorf("%d error series, want 1", n)
	}
}

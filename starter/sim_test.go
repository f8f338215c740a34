package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/millwright/millwright/local/awsemu"
)

// runSim runs `starter sim <args>` against the emulator at url.
func runSim(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	cmd := newSimCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"--endpoint", url}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestSimCommands(t *testing.T) {
	emu, err := awsemu.New(awsemu.Options{EventQueue: "events"})
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(emu.Handler())
	t.Cleanup(func() { server.Close(); _ = emu.Close() })

	client := ec2.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
		HTTPClient: requestBodyWithoutWriteTo{}}, func(o *ec2.Options) { o.BaseEndpoint = aws.String(server.URL) })
	images, err := client.DescribeImages(t.Context(), &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil || len(images.Images) == 0 {
		t.Fatalf("DescribeImages: %v", err)
	}
	run, err := client.RunInstances(t.Context(), &ec2.RunInstancesInput{
		ImageId: images.Images[0].ImageId, InstanceType: "m5.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		InstanceMarketOptions: &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeSpot},
	})
	if err != nil {
		t.Fatal(err)
	}
	node := aws.ToString(run.Instances[0].PrivateDnsName)

	tests := []struct {
		name     string
		args     []string
		wantOut  string
		wantErr  string
		checkEmu func(t *testing.T)
	}{
		{name: "ice", args: []string{"ice", "--type", "m5.large", "--zone", "us-east-1a", "--capacity-type", "spot"},
			wantOut: "insufficient capacity: type m5.large, zone us-east-1a, capacity type spot"},
		{name: "ice needs a scope", args: []string{"ice"}, wantErr: "give at least one"},
		{name: "throttle", args: []string{"throttle", "--every", "5", "--action", "CreateFleet"}, wantOut: "throttling every 5 call(s) of CreateFleet"},
		{name: "state", args: []string{"state"}, wantOut: aws.ToString(run.Instances[0].InstanceId)},
		{name: "interrupt by node name", args: []string{"interrupt", node, "--after", "30s"}, wantOut: "EC2 Spot Instance Interruption Warning",
			checkEmu: func(t *testing.T) {
				if q := emu.State().Queues; len(q) != 1 || q[0].Visible != 1 {
					t.Errorf("queues %+v", q)
				}
			}},
		{name: "unknown node", args: []string{"rebalance", "ip-1-2-3-4.ec2.internal"}, wantErr: "no instance has the Node name"},
		{name: "events", args: []string{"events", "--state-changes"}, wantOut: "state-change notifications: true"},
		{name: "clear", args: []string{"ice", "--clear"}, wantOut: "throttling every 5"},
		{name: "throttle off", args: []string{"throttle", "--off"}, wantOut: "throttling off",
			checkEmu: func(t *testing.T) {
				if f := emu.Faults(); f.Throttle != nil || len(f.Capacity) != 0 {
					t.Errorf("faults left %+v", f)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runSim(t, server.URL, tc.args...)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("%v\n%s", err, out)
			case !strings.Contains(out, tc.wantOut):
				t.Errorf("output lacks %q:\n%s", tc.wantOut, out)
			}
			if tc.checkEmu != nil {
				tc.checkEmu(t)
			}
		})
	}
}

// requestBodyWithoutWriteTo hides the request body's WriteTo from net/http:
// against a server as fast as the local emulator, the SDK's early close of
// the request body otherwise makes the transport drop the connection under
// the response now and then (aws-sdk-go-v2#2737).
type requestBodyWithoutWriteTo struct{}

func (requestBodyWithoutWriteTo) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = struct{ io.ReadCloser }{req.Body}
	}
	return http.DefaultClient.Do(req)
}

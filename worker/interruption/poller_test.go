package interruption

import (
	"context"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap/zaptest"
)

// kindCounts records InterruptionMessageReceived calls.
type kindCounts map[string]int

func (k kindCounts) InterruptionMessageReceived(kind string) { k[kind]++ }

// noOwner owns no instance: the poller signals nothing.
type noOwner struct{}

func (noOwner) NodeWorkflowForInstance(context.Context, string) (string, error) { return "", nil }

func TestPollerCountsMessagesByKind(t *testing.T) {
	bodies := []string{
		eventBody("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0abc","instance-action":"terminate"}`),
		eventBody("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0def","instance-action":"terminate"}`),
		eventBody("aws.ec2", "EC2 Instance Rebalance Recommendation", `{"instance-id":"i-0abc"}`),
		eventBody("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc","state":"running"}`),
		"not an event",
	}
	counts := kindCounts{}
	poller := &Poller{Finder: noOwner{}, Logger: zaptest.NewLogger(t), Recorder: counts}
	for _, body := range bodies {
		msg := sqstypes.Message{
			Body: aws.String(body),
			// Past the redelivery allowance for unknown instances, so
			// every message is done with.
			Attributes: map[string]string{string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount): "9"},
		}
		if !poller.handle(context.Background(), msg) {
			t.Errorf("message %q kept for redelivery", body)
		}
	}
	want := kindCounts{"spot-warning": 2, "rebalance": 1, KindIgnored: 1, KindUnreadable: 1}
	if !reflect.DeepEqual(counts, want) {
		t.Fatalf("counts %v, want %v", counts, want)
	}
}

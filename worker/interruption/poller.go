package interruption

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/millwright/millwright/workflows"
)

// SQSAPI is the slice of *sqs.Client the poller uses.
type SQSAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// NodeFinder maps an instance to the id of the node workflow that owns it;
// "" when no running node workflow does.
type NodeFinder interface {
	NodeWorkflowForInstance(ctx context.Context, instanceID string) (string, error)
}

// Signaler is the slice of client.Client the poller uses.
type Signaler interface {
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
}

// MessageRecorder counts the messages the poller receives, by kind: the
// workflows' InterruptionKind, "ignored" for events Millwright does not act
// on, "unreadable" for bodies that are not events.
type MessageRecorder interface {
	InterruptionMessageReceived(kind string)
}

// maxReceivesForUnknownInstance: an event for an instance no workflow owns
// yet may be early (the launch has not recorded the instance id); it is left
// for redelivery this many times, then dropped as not ours.
const maxReceivesForUnknownInstance = 5

// Poller long-polls the interruption queue and signals node workflows.
type Poller struct {
	SQS      SQSAPI
	Queue    string // name or URL
	Finder   NodeFinder
	Signaler Signaler
	Logger   *zap.Logger
	// WaitTime is the long-poll wait (default 20 s, SQS's maximum).
	WaitTime time.Duration
	// ErrorBackoff spaces retries after a failed receive (default 5 s).
	ErrorBackoff time.Duration
	// Recorder, when set, counts received messages.
	Recorder MessageRecorder
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) error {
	if p.WaitTime == 0 {
		p.WaitTime = 20 * time.Second
	}
	if p.ErrorBackoff == 0 {
		p.ErrorBackoff = 5 * time.Second
	}
	// The queue may not exist yet (created by another stack) or be briefly
	// unreachable: keep asking rather than run without interruption handling.
	var queueURL string
	for {
		url, err := p.queueURL(ctx)
		if err == nil {
			queueURL = url
			break
		}
		p.Logger.Warn("interruption queue not available yet; retrying", zap.Error(err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.ErrorBackoff):
		}
	}
	p.Logger.Info("polling the interruption queue", zap.String("queue", queueURL))
	for ctx.Err() == nil {
		out, err := p.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(queueURL),
			MaxNumberOfMessages:         10,
			WaitTimeSeconds:             int32(p.WaitTime / time.Second),
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount},
		})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			p.Logger.Warn("receiving from the interruption queue failed", zap.Error(err))
			select {
			case <-ctx.Done():
			case <-time.After(p.ErrorBackoff):
			}
			continue
		}
		for _, msg := range out.Messages {
			if p.handle(ctx, msg) {
				if _, err := p.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: msg.ReceiptHandle}); err != nil {
					p.Logger.Warn("deleting a handled interruption message failed; it will be handled again", zap.Error(err))
				}
			}
		}
	}
	return nil
}

func (p *Poller) queueURL(ctx context.Context) (string, error) {
	if len(p.Queue) > 8 && (p.Queue[:7] == "http://" || p.Queue[:8] == "https://") {
		return p.Queue, nil
	}
	out, err := p.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(p.Queue)})
	if err != nil {
		return "", fmt.Errorf("interruption queue %q: %w", p.Queue, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// handle signals the owners of one message's instances and tells whether the
// message is done with (delete it) or should be delivered again.
func (p *Poller) handle(ctx context.Context, msg sqstypes.Message) (done bool) {
	notice, err := ParseMessage(aws.ToString(msg.Body))
	if err != nil {
		p.record(KindUnreadable)
		p.Logger.Warn("dropping an unreadable interruption message", zap.Error(err))
		return true
	}
	if notice.Interruption.Kind == "" {
		p.record(KindIgnored)
	} else {
		p.record(string(notice.Interruption.Kind))
	}
	receives, _ := strconv.Atoi(msg.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
	done = true
	for _, instanceID := range notice.InstanceIDs {
		workflowID, err := p.Finder.NodeWorkflowForInstance(ctx, instanceID)
		if err != nil {
			p.Logger.Warn("finding the node workflow of an instance failed", zap.String("instance", instanceID), zap.Error(err))
			done = false
			continue
		}
		if workflowID == "" {
			if receives < maxReceivesForUnknownInstance {
				done = false
			}
			continue
		}
		err = p.Signaler.SignalWorkflow(ctx, workflowID, "", workflows.SignalInterruption, notice.Interruption)
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
			// The workflow ended meanwhile: nothing left to interrupt.
		case err != nil:
			p.Logger.Warn("signalling an interruption failed; will retry", zap.String("workflow", workflowID), zap.Error(err))
			done = false
		default:
			p.Logger.Info("Signalled interruption", zap.String("kind", string(notice.Interruption.Kind)),
				zap.String("instance", instanceID), zap.String("workflow", workflowID))
		}
	}
	return done
}

// Kinds a message is counted under besides the workflows' InterruptionKind.
const (
	// KindIgnored is an event Millwright does not act on (a state change to
	// running, an unknown detail type).
	KindIgnored = "ignored"
	// KindUnreadable is a message body that is not an EventBridge event.
	KindUnreadable = "unreadable"
)

func (p *Poller) record(kind string) {
	if p.Recorder != nil {
		p.Recorder.InterruptionMessageReceived(kind)
	}
}

package awsemu

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQS conformance through the real SDK client (which validates the MD5 of
// every body it sends and receives).

func (h *harness) queue(name string, attrs map[string]string) string {
	h.t.Helper()
	out, err := h.sqs.CreateQueue(h.ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		h.t.Fatalf("CreateQueue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

// waitForLongPoll waits until a receive blocks on the fake clock (a real
// goroutine parks, so this polls with a deadline rather than sleeping).
func (h *harness) waitForLongPoll(waiters int) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.clock.Waiters() < waiters {
		if time.Now().After(deadline) {
			h.t.Fatalf("no long poll is waiting (waiters %d)", h.clock.Waiters())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSQSQueueURLs(t *testing.T) {
	h := newHarness(t)
	url := h.queue("interruptions", nil)
	if want := h.server.URL + "/123456789012/interruptions"; url != want {
		t.Errorf("queue URL %q, want %q", url, want)
	}
	got, err := h.sqs.GetQueueUrl(h.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("interruptions")})
	if err != nil || aws.ToString(got.QueueUrl) != url {
		t.Errorf("GetQueueUrl: %v %v", err, got)
	}
	if again := h.queue("interruptions", nil); again != url {
		t.Errorf("creating an existing queue: %q", again)
	}
	_, err = h.sqs.CreateQueue(h.ctx, &sqs.CreateQueueInput{QueueName: aws.String("interruptions"), Attributes: map[string]string{"VisibilityTimeout": "5"}})
	var exists *sqstypes.QueueNameExists
	if !errors.As(err, &exists) {
		t.Errorf("same name, other attributes: %v", err)
	}
	if _, err := h.sqs.SendMessage(h.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x"), DelaySeconds: 10}); err != nil {
		t.Fatal(err)
	}
	attrs, err := h.sqs.GetQueueAttributes(h.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	if a := attrs.Attributes; a["QueueArn"] != "arn:aws:sqs:us-east-1:123456789012:interruptions" || a["ApproximateNumberOfMessagesDelayed"] != "1" ||
		a["ApproximateNumberOfMessages"] != "0" || a["VisibilityTimeout"] != "30" {
		t.Errorf("attributes %v", a)
	}
	_, err = h.sqs.GetQueueUrl(h.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("missing")})
	var missing *sqstypes.QueueDoesNotExist
	if !errors.As(err, &missing) || apiErrorCode(t, err) != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Errorf("unknown queue: %v", err)
	}
}

func TestSQSSendReceiveDelete(t *testing.T) {
	h := newHarness(t)
	url := h.queue("q", map[string]string{"VisibilityTimeout": "30"})
	sent, err := h.sqs.SendMessage(h.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(`{"hello":"world"}`),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"kind":  {DataType: aws.String("String"), StringValue: aws.String("test")},
			"count": {DataType: aws.String("Number"), StringValue: aws.String("3")},
			"blob":  {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2}},
		}})
	if err != nil {
		t.Fatal(err) // includes the SDK's MD5 check of the body
	}
	if aws.ToString(sent.MD5OfMessageAttributes) != "" && len(aws.ToString(sent.MD5OfMessageAttributes)) != 32 {
		t.Errorf("MD5OfMessageAttributes %q", aws.ToString(sent.MD5OfMessageAttributes))
	}

	got, err := h.sqs.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
		MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"ApproximateReceiveCount"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 1 {
		t.Fatalf("received %d messages", len(got.Messages))
	}
	m := got.Messages[0]
	if aws.ToString(m.MessageId) != aws.ToString(sent.MessageId) || aws.ToString(m.Body) != `{"hello":"world"}` ||
		m.Attributes["ApproximateReceiveCount"] != "1" || aws.ToString(m.MD5OfMessageAttributes) != aws.ToString(sent.MD5OfMessageAttributes) ||
		aws.ToString(m.MessageAttributes["kind"].StringValue) != "test" {
		t.Errorf("received %+v", m)
	}

	// Invisible for the visibility timeout, then delivered again.
	if again, err := h.sqs.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)}); err != nil || len(again.Messages) != 0 {
		t.Fatalf("in flight message received: %v %+v", err, again)
	}
	h.clock.Step(30 * time.Second)
	redelivered, err := h.sqs.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{"All"}})
	if err != nil || len(redelivered.Messages) != 1 || redelivered.Messages[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("redelivery: %v %+v", err, redelivered)
	}
	handle := redelivered.Messages[0].ReceiptHandle

	// ChangeMessageVisibility to 0 makes it receivable now.
	if _, err := h.sqs.ChangeMessageVisibility(h.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: handle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	third, err := h.sqs.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)})
	if err != nil || len(third.Messages) != 1 {
		t.Fatalf("after visibility 0: %v %+v", err, third)
	}
	// The older handle is stale; the newest deletes.
	_, err = h.sqs.ChangeMessageVisibility(h.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: handle, VisibilityTimeout: 10})
	if code := apiErrorCode(t, err); code != "InvalidParameterValue" {
		t.Errorf("stale handle: %q", code)
	}
	if _, err := h.sqs.DeleteMessage(h.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: third.Messages[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(time.Minute)
	if gone, err := h.sqs.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)}); err != nil || len(gone.Messages) != 0 {
		t.Errorf("deleted message came back: %v %+v", err, gone)
	}

	_, err = h.sqs.DeleteMessage(h.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String("garbage")})
	var invalid *sqstypes.ReceiptHandleIsInvalid
	if !errors.As(err, &invalid) {
		t.Errorf("garbage handle: %v", err)
	}
	_, err = h.sqs.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 11})
	if code := apiErrorCode(t, err); code != "InvalidParameterValue" {
		t.Errorf("11 messages: %q", code)
	}
}

func TestSQSChangeVisibilityOfVisibleMessage(t *testing.T) {
	h := newHarness(t)
	url := h.queue("q", nil)
	if _, err := h.sqs.SendMessage(h.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x")}); err != nil {
		t.Fatal(err)
	}
	got, err := h.sqs.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), VisibilityTimeout: 5})
	if err != nil || len(got.Messages) != 1 {
		t.Fatal(err)
	}
	h.clock.Step(5 * time.Second)
	_, err = h.sqs.ChangeMessageVisibility(h.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: got.Messages[0].ReceiptHandle, VisibilityTimeout: 30})
	var notInflight *sqstypes.MessageNotInflight
	if !errors.As(err, &notInflight) {
		t.Errorf("visible message: %v", err)
	}
}

func TestSQSLongPoll(t *testing.T) {
	t.Run("a send wakes the receiver", func(t *testing.T) {
		h := newHarness(t)
		url := h.queue("q", nil)
		baseline := h.clock.Waiters()
		done := make(chan *sqs.ReceiveMessageOutput)
		go func() {
			out, err := h.sqs.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
			if err != nil {
				t.Error(err)
			}
			done <- out
		}()
		h.waitForLongPoll(baseline + 1)
		if _, err := h.sqs.SendMessage(h.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("wake up")}); err != nil {
			t.Fatal(err)
		}
		out := <-done
		if out == nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "wake up" {
			t.Errorf("long poll returned %+v", out)
		}
	})
	t.Run("the wait ends empty", func(t *testing.T) {
		h := newHarness(t)
		url := h.queue("q", map[string]string{"ReceiveMessageWaitTimeSeconds": "20"})
		baseline := h.clock.Waiters()
		done := make(chan *sqs.ReceiveMessageOutput)
		go func() {
			// No WaitTimeSeconds: the queue's default long poll applies.
			out, err := h.sqs.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)})
			if err != nil {
				t.Error(err)
			}
			done <- out
		}()
		h.waitForLongPoll(baseline + 1)
		h.clock.Step(19 * time.Second)
		select {
		case out := <-done:
			t.Fatalf("returned before the wait time: %+v", out)
		default:
		}
		h.clock.Step(time.Second)
		if out := <-done; out == nil || len(out.Messages) != 0 {
			t.Errorf("empty long poll returned %+v", out)
		}
	})
	t.Run("a message becoming visible wakes the receiver", func(t *testing.T) {
		h := newHarness(t)
		url := h.queue("q", nil)
		if _, err := h.sqs.SendMessage(h.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("later"), DelaySeconds: 5}); err != nil {
			t.Fatal(err)
		}
		baseline := h.clock.Waiters()
		done := make(chan *sqs.ReceiveMessageOutput)
		go func() {
			out, err := h.sqs.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
			if err != nil {
				t.Error(err)
			}
			done <- out
		}()
		h.waitForLongPoll(baseline + 1)
		h.clock.Step(5 * time.Second)
		if out := <-done; out == nil || len(out.Messages) != 1 {
			t.Errorf("delayed message: %+v", out)
		}
	})
}

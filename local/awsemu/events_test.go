package awsemu

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

const eventQueue = "millwright-events"

// spotInstance launches one running spot instance through CreateFleet.
func (h *harness) spotInstance() string {
	h.t.Helper()
	lt := h.launchTemplate("spot-"+randomHex(6), "x86_64", al2023UserData("millwright.dev/nodepool=spot", "millwright.dev/unregistered=true:NoExecute"))
	out, err := h.ec2.CreateFleet(h.ctx, h.fleetInput(fleetRequest{template: lt, types: []string{"m5.large"}, zones: []string{"us-east-1a"}, capacityType: capacitySpot}))
	if err != nil || len(out.Instances) != 1 {
		h.t.Fatalf("CreateFleet: %v %+v", err, out)
	}
	h.step(h.emu.opts.BootDelay)
	return out.Instances[0].InstanceIds[0]
}

// receiveEvents takes every event on the queue, through the SQS SDK client.
func (h *harness) receiveEvents() []Event {
	h.t.Helper()
	url, err := h.sqs.GetQueueUrl(h.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(eventQueue)})
	if err != nil {
		h.t.Fatalf("GetQueueUrl: %v", err)
	}
	var events []Event
	for {
		out, err := h.sqs.ReceiveMessage(h.ctx, &sqs.ReceiveMessageInput{QueueUrl: url.QueueUrl, MaxNumberOfMessages: 10})
		if err != nil {
			h.t.Fatalf("ReceiveMessage: %v", err)
		}
		if len(out.Messages) == 0 {
			return events
		}
		for _, m := range out.Messages {
			var ev Event
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
				h.t.Fatalf("message is not an EventBridge event: %v\n%s", err, aws.ToString(m.Body))
			}
			events = append(events, ev)
			if _, err := h.sqs.DeleteMessage(h.ctx, &sqs.DeleteMessageInput{QueueUrl: url.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
				h.t.Fatalf("DeleteMessage: %v", err)
			}
		}
	}
}

func checkEnvelope(t *testing.T, ev Event, source, detailType string) {
	t.Helper()
	if ev.Version != "0" || ev.Source != source || ev.DetailType != detailType || ev.Account != "123456789012" || ev.Region != "us-east-1" || ev.ID == "" {
		t.Errorf("envelope %+v, want source %s detail-type %q", ev, source, detailType)
	}
	if _, err := time.Parse(time.RFC3339, ev.Time); err != nil {
		t.Errorf("time %q: %v", ev.Time, err)
	}
}

func TestSpotInterruption(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.EventQueue = eventQueue
		o.BootDelay = time.Second
		o.ShutdownDelay = 10 * time.Second
	})
	id := h.spotInstance()
	node := aws.ToString(h.instance(id).PrivateDnsName)
	if _, ok := h.nodes.node(node); !ok {
		t.Fatal("spot instance has no Node")
	}

	got, err := h.admin.InterruptSpot(h.ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !got.TerminateAt.Equal(h.clock.Now().Add(2 * time.Minute)) {
		t.Errorf("terminate at %v, want two minutes from now", got.TerminateAt)
	}
	events := h.receiveEvents()
	if len(events) != 1 {
		t.Fatalf("%d events, want 1", len(events))
	}
	checkEnvelope(t, events[0], "aws.ec2", "EC2 Spot Instance Interruption Warning")
	var detail SpotInterruptionDetail
	if err := json.Unmarshal(events[0].Detail, &detail); err != nil {
		t.Fatal(err)
	}
	if detail.InstanceID != id || detail.InstanceAction != "terminate" {
		t.Errorf("detail %+v", detail)
	}
	if len(events[0].Resources) != 1 || events[0].Resources[0] != "arn:aws:ec2:us-east-1a:instance/"+id {
		t.Errorf("resources %v", events[0].Resources)
	}
	// The raw JSON uses EventBridge's hyphenated keys.
	raw, _ := json.Marshal(events[0])
	for _, key := range []string{`"detail-type"`, `"instance-id"`, `"instance-action"`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("event JSON lacks %s: %s", key, raw)
		}
	}

	h.step(2*time.Minute - time.Second)
	if s := h.instance(id).State.Name; s != ec2types.InstanceStateNameRunning {
		t.Fatalf("terminated early: %s", s)
	}
	h.step(time.Second)
	inst := h.instance(id)
	if inst.State.Name != ec2types.InstanceStateNameShuttingDown || aws.ToString(inst.StateReason.Code) != "Server.SpotInstanceTermination" {
		t.Fatalf("after two minutes: %s %v", inst.State.Name, inst.StateReason)
	}
	h.step(10 * time.Second)
	h.step(h.emu.opts.NodeDeletionDelay)
	if s := h.instance(id).State.Name; s != ec2types.InstanceStateNameTerminated {
		t.Errorf("final state %s", s)
	}
	if _, ok := h.nodes.node(node); ok {
		t.Error("the interrupted instance's Node was not deleted")
	}
}

func TestInterruptionRefusals(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.EventQueue = eventQueue })
	onDemand := h.runOne("m5.large", nil)
	tests := []struct {
		name string
		call func() error
	}{
		{"unknown instance", func() error { _, err := h.admin.InterruptSpot(h.ctx, "i-0123456789abcdef0", 0); return err }},
		{"on-demand instance", func() error { _, err := h.admin.InterruptSpot(h.ctx, onDemand, 0); return err }},
		{"rebalance for on-demand", func() error { _, err := h.admin.RecommendRebalance(h.ctx, onDemand); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); err == nil {
				t.Error("accepted")
			}
		})
	}
	if !IsInstanceNotFound(tests[0].call()) {
		t.Error("unknown instance is not reported as not found")
	}
}

func TestRebalanceAndScheduledChange(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.EventQueue = eventQueue; o.BootDelay = time.Second })
	id := h.spotInstance()
	if _, err := h.admin.RecommendRebalance(h.ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.ScheduleChange(h.ctx, id, ScheduledChange{StartIn: Duration(48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	events := h.receiveEvents()
	if len(events) != 2 {
		t.Fatalf("%d events, want 2", len(events))
	}
	checkEnvelope(t, events[0], "aws.ec2", "EC2 Instance Rebalance Recommendation")
	var rebalance RebalanceRecommendationDetail
	if err := json.Unmarshal(events[0].Detail, &rebalance); err != nil || rebalance.InstanceID != id {
		t.Errorf("rebalance detail %s: %v", events[0].Detail, err)
	}
	checkEnvelope(t, events[1], "aws.health", "AWS Health Event")
	var health HealthEventDetail
	if err := json.Unmarshal(events[1].Detail, &health); err != nil {
		t.Fatal(err)
	}
	if health.Service != "EC2" || health.EventTypeCategory != "scheduledChange" || health.EventTypeCode != "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED" ||
		len(health.AffectedEntities) != 1 || health.AffectedEntities[0].EntityValue != id || !strings.HasPrefix(health.EventArn, "arn:aws:health:us-east-1::event/EC2/") {
		t.Errorf("health detail %+v", health)
	}
	start, err := time.Parse(healthTime, health.StartTime)
	if err != nil || !start.Equal(h.clock.Now().Add(48*time.Hour).Truncate(time.Second)) {
		t.Errorf("start time %q: %v", health.StartTime, err)
	}
	if s := h.instance(id).State.Name; s != ec2types.InstanceStateNameRunning {
		t.Errorf("rebalance or scheduled change changed the instance: %s", s)
	}
}

func TestStateChangeNotifications(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.BootDelay = time.Second; o.ShutdownDelay = time.Second })
	if err := h.admin.ConfigureEvents(h.ctx, EventConfig{Queue: eventQueue, StateChangeNotifications: true}); err != nil {
		t.Fatal(err)
	}
	id := h.runOne("m5.large", nil)
	h.step(time.Second)
	if _, err := h.ec2.TerminateInstances(h.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	h.step(time.Second)
	var states []string
	for _, ev := range h.receiveEvents() {
		checkEnvelope(t, ev, "aws.ec2", "EC2 Instance State-change Notification")
		var d StateChangeDetail
		if err := json.Unmarshal(ev.Detail, &d); err != nil || d.InstanceID != id {
			t.Fatalf("detail %s: %v", ev.Detail, err)
		}
		if want := "arn:aws:ec2:us-east-1:123456789012:instance/" + id; len(ev.Resources) != 1 || ev.Resources[0] != want {
			t.Errorf("resources %v", ev.Resources)
		}
		states = append(states, d.State)
	}
	if want := []string{"pending", "running", "shutting-down", "terminated"}; !equalStrings(states, want) {
		t.Errorf("states %v, want %v", states, want)
	}
}

func TestEventsNeedAQueue(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.BootDelay = time.Second })
	id := h.spotInstance()
	if _, err := h.admin.InterruptSpot(h.ctx, id, time.Minute); err == nil {
		t.Error("interruption accepted with no event queue configured")
	}
}

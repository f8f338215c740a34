package interruption

import (
	"strings"
	"testing"
	"time"

	"github.com/millwright/millwright/workflows"
)

// eventBody builds an EventBridge envelope as AWS sends it.
func eventBody(source, detailType, detail string) string {
	return `{"version":"0","id":"ev-1","detail-type":"` + detailType + `","source":"` + source +
		`","account":"123456789012","time":"2026-11-30T10:00:00Z","region":"us-east-1","resources":[],"detail":` + detail + `}`
}

func TestParseMessage(t *testing.T) {
	eventTime := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		body      string
		instances []string
		kind      workflows.InterruptionKind
		deadline  time.Time
		wantErr   string
	}{
		{
			name:      "spot interruption warning gives two minutes",
			body:      eventBody("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0abc","instance-action":"terminate"}`),
			instances: []string{"i-0abc"}, kind: workflows.InterruptionSpotWarning, deadline: eventTime.Add(2 * time.Minute),
		},
		{
			name:      "rebalance recommendation",
			body:      eventBody("aws.ec2", "EC2 Instance Rebalance Recommendation", `{"instance-id":"i-0abc"}`),
			instances: []string{"i-0abc"}, kind: workflows.InterruptionRebalance,
		},
		{
			name:      "state change to stopping",
			body:      eventBody("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc","state":"stopping"}`),
			instances: []string{"i-0abc"}, kind: workflows.InterruptionStateChange,
		},
		{
			name: "state change to running is ignored",
			body: eventBody("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc","state":"running"}`),
		},
		{
			name: "scheduled change names every affected instance",
			body: eventBody("aws.health", "AWS Health Event",
				`{"eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","affectedEntities":[{"entityValue":"i-1"},{"entityValue":"vol-2"},{"entityValue":"i-3"}]}`),
			instances: []string{"i-1", "i-3"}, kind: workflows.InterruptionScheduledChange,
		},
		{
			name: "unrelated event is ignored",
			body: eventBody("aws.autoscaling", "EC2 Instance Launch Successful", `{}`),
		},
		{name: "not JSON", body: "hello", wantErr: "not an EventBridge event"},
		{
			name:    "malformed detail names the event",
			body:    eventBody("aws.ec2", "EC2 Spot Instance Interruption Warning", `"oops"`),
			wantErr: "spot interruption ev-1",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			notice, err := ParseMessage(tc.body)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(notice.InstanceIDs, ",") != strings.Join(tc.instances, ",") {
				t.Fatalf("instances %v, want %v", notice.InstanceIDs, tc.instances)
			}
			if len(tc.instances) == 0 {
				return
			}
			got := notice.Interruption
			if got.Kind != tc.kind || got.EventID != "ev-1" || !got.EventTime.Equal(eventTime) || !got.Deadline.Equal(tc.deadline) {
				t.Fatalf("interruption %+v, want kind %s, event ev-1 at %s, deadline %s", got, tc.kind, eventTime, tc.deadline)
			}
		})
	}
}

func TestInstanceIDFromProviderID(t *testing.T) {
	cases := map[string]string{
		"aws:///us-east-1a/i-0123456789abcdef0": "i-0123456789abcdef0",
		"aws:///us-east-1a/":                    "",
		"kwok://node-1":                         "",
		"":                                      "",
	}
	for providerID, want := range cases {
		if got := InstanceIDFromProviderID(providerID); got != want {
			t.Errorf("InstanceIDFromProviderID(%q) = %q, want %q", providerID, got, want)
		}
	}
}

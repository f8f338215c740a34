package events

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"
)

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestRecorderDeduplicatesWithinTheTimeout(t *testing.T) {
	pod := PodRef("ns", "p", "uid-1")
	cases := []struct {
		name    string
		publish []Event
		advance time.Duration
		again   []Event
		want    int
	}{
		{
			name:    "same reason and values within the window: once",
			publish: []Event{PodFailedToSchedule(pod, "uid-1", "no pool")},
			again:   []Event{PodFailedToSchedule(pod, "uid-1", "no pool")},
			want:    1,
		},
		{
			name:    "same event after its timeout: again",
			publish: []Event{PodFailedToSchedule(pod, "uid-1", "no pool")},
			advance: 5*time.Minute + time.Second,
			again:   []Event{PodFailedToSchedule(pod, "uid-1", "no pool")},
			want:    2,
		},
		{
			name:    "default timeout applies when none is set",
			publish: []Event{NodeRegistered(pod, "claim", "node")},
			advance: DefaultDedupeTimeout - time.Second,
			again:   []Event{NodeRegistered(pod, "claim", "node")},
			want:    1,
		},
		{
			name:    "another reason for the same pod: both",
			publish: []Event{PodFailedToSchedule(pod, "uid-1", "no pool")},
			again:   []Event{PodFailedToSchedule(pod, "uid-1", "taint not tolerated")},
			want:    2,
		},
		{
			name:    "no dedupe values: every time",
			publish: []Event{{InvolvedObject: pod, Type: "Normal", Reason: "X", Message: "m"}},
			again:   []Event{{InvolvedObject: pod, Type: "Normal", Reason: "X", Message: "m"}},
			want:    2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
			fake := record.NewFakeRecorder(10)
			r := NewRecorder(fake, clk)
			r.Publish(tc.publish...)
			clk.Step(tc.advance)
			r.Publish(tc.again...)
			if got := drain(fake); len(got) != tc.want {
				t.Errorf("published %d events %q, want %d", len(got), got, tc.want)
			}
		})
	}
}

func TestRecorderRateLimits(t *testing.T) {
	fake := record.NewFakeRecorder(100)
	r := NewRecorder(fake, clocktesting.NewFakeClock(time.Now()))
	limiter := flowcontrol.NewFakeNeverRateLimiter()
	for i := range 5 {
		e := PodNominated(PodRef("ns", "p", "u"), string(rune('a'+i)), "claim", "")
		e.RateLimiter = limiter
		r.Publish(e)
	}
	if got := drain(fake); len(got) != 0 {
		t.Errorf("published %q through a limiter without tokens", got)
	}
	r.Publish(PodNominated(PodRef("ns", "p", "u"), "u", "claim", "node-1"))
	got := drain(fake)
	if len(got) != 1 || got[0] != "Normal Nominated Pod should schedule on: nodeclaim/claim, node/node-1" {
		t.Errorf("published %q, want the nomination", got)
	}
}

func TestMessagesAreTruncated(t *testing.T) {
	long := make([]byte, 2*maxMessageLength)
	for i := range long {
		long[i] = 'x'
	}
	e := PodFailedToSchedule(PodRef("ns", "p", "u"), "u", string(long))
	if len(e.Message) != maxMessageLength {
		t.Errorf("message of %d characters, want %d", len(e.Message), maxMessageLength)
	}
}

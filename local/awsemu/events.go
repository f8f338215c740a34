package awsemu

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/millwright/millwright/local/awsemu/queues"
)

// EventBridge events as AWS delivers them to an SQS target: the envelope and
// the detail shapes of the events Millwright reacts to. They are exported so
// tests (and the product's tests) can decode what the emulator sends.

// Event is the EventBridge envelope.
type Event struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// Detail types and sources, exactly as AWS sends them.
const (
	SourceEC2    = "aws.ec2"
	SourceHealth = "aws.health"

	DetailTypeSpotInterruption = "EC2 Spot Instance Interruption Warning"
	DetailTypeRebalance        = "EC2 Instance Rebalance Recommendation"
	DetailTypeStateChange      = "EC2 Instance State-change Notification"
	DetailTypeHealth           = "AWS Health Event"
)

// SpotInterruptionDetail is the detail of a spot interruption warning.
type SpotInterruptionDetail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
}

// RebalanceRecommendationDetail is the detail of a rebalance recommendation.
type RebalanceRecommendationDetail struct {
	InstanceID string `json:"instance-id"`
}

// StateChangeDetail is the detail of an instance state-change notification.
type StateChangeDetail struct {
	InstanceID string `json:"instance-id"`
	State      string `json:"state"`
}

// HealthEventDetail is the detail of an AWS Health event (scheduled change).
type HealthEventDetail struct {
	EventArn          string                   `json:"eventArn"`
	Service           string                   `json:"service"`
	EventTypeCode     string                   `json:"eventTypeCode"`
	EventTypeCategory string                   `json:"eventTypeCategory"`
	StartTime         string                   `json:"startTime"`
	EndTime           string                   `json:"endTime"`
	EventDescription  []HealthEventDescription `json:"eventDescription"`
	AffectedEntities  []HealthAffectedEntity   `json:"affectedEntities"`
}

// HealthEventDescription is one localized description of a Health event.
type HealthEventDescription struct {
	Language          string `json:"language"`
	LatestDescription string `json:"latestDescription"`
}

// HealthAffectedEntity names a resource a Health event affects.
type HealthAffectedEntity struct {
	EntityValue string `json:"entityValue"`
}

// eventTime is EventBridge's envelope time format.
const eventTime = "2006-01-02T15:04:05Z"

// healthTime is the format AWS Health uses for startTime/endTime.
const healthTime = "Mon, 2 Jan 2006 15:04:05 GMT"

func (e *Emulator) newEvent(source, detailType string, at time.Time, resources []string, detail any) Event {
	raw, _ := json.Marshal(detail)
	return Event{
		Version: "0", ID: uuid.NewString(), DetailType: detailType, Source: source,
		Account: e.opts.AccountID, Time: at.UTC().Format(eventTime), Region: e.opts.Region,
		Resources: resources, Detail: raw,
	}
}

// zonalInstanceArn is the resource ARN in spot and rebalance events, which
// carries the zone and no account (arn:aws:ec2:us-east-1a:instance/i-…).
func zonalInstanceArn(inst *instance) string {
	return fmt.Sprintf("arn:aws:ec2:%s:instance/%s", inst.zone.name, inst.id)
}

func stateChangeEvent(e *Emulator, inst *instance, at time.Time) Event {
	return e.newEvent(SourceEC2, DetailTypeStateChange, at,
		[]string{fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", e.opts.Region, e.opts.AccountID, inst.id)},
		StateChangeDetail{InstanceID: inst.id, State: inst.state})
}

// sendEventLocked puts ev on the event queue, creating the queue if needed.
// Without a configured queue the event is dropped (as EventBridge drops
// events no rule matches). e.mu must be held; the SQS service has its own
// lock and never takes e.mu.
func (e *Emulator) sendEventLocked(ev Event) {
	if e.eventQueue == "" {
		e.log.Debug("no event queue configured; dropping event", zap.String("detailType", ev.DetailType))
		return
	}
	if err := e.sqs.CreateQueue(e.eventQueue, nil); err != nil {
		e.log.Warn("cannot create event queue", zap.String("queue", e.eventQueue), zap.Error(err))
		return
	}
	body, _ := json.Marshal(ev)
	if _, err := e.sqs.Send(e.eventQueue, queues.SendInput{Body: string(body)}); err != nil {
		e.log.Warn("cannot send event", zap.String("queue", e.eventQueue), zap.Error(err))
	}
}

// EventConfig says where events go and whether state changes are sent.
type EventConfig struct {
	Queue                    string `json:"queue"`
	StateChangeNotifications bool   `json:"stateChangeNotifications"`
}

// EventConfig returns the current event routing.
func (e *Emulator) EventConfig() EventConfig {
	e.mu.Lock()
	defer e.mu.Unlock()
	return EventConfig{Queue: e.eventQueue, StateChangeNotifications: e.stateChanges}
}

// ConfigureEvents changes where events go; the queue is created now so a
// consumer can find it at once.
func (e *Emulator) ConfigureEvents(cfg EventConfig) error {
	if cfg.Queue != "" {
		if err := e.sqs.CreateQueue(cfg.Queue, nil); err != nil {
			return fmt.Errorf("event queue %q: %w", cfg.Queue, err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.eventQueue = cfg.Queue
	e.stateChanges = cfg.StateChangeNotifications
	return nil
}

// AdminError is an admin-API failure with the HTTP status it maps to.
type AdminError struct {
	Status  int    `json:"-"`
	Message string `json:"error"`
}

func (a *AdminError) Error() string { return a.Message }

func adminErrorf(status int, format string, args ...any) *AdminError {
	return &AdminError{Status: status, Message: fmt.Sprintf(format, args...)}
}

// IsInstanceNotFound reports whether err is an admin call's unknown-instance
// error.
func IsInstanceNotFound(err error) bool {
	var a *AdminError
	return errors.As(err, &a) && a.Status == http.StatusNotFound
}

// liveInstanceLocked finds an instance that can still receive events.
func (e *Emulator) liveInstanceLocked(id string) (*instance, error) {
	inst, ok := e.instances[id]
	if !ok {
		return nil, adminErrorf(http.StatusNotFound, "instance %s does not exist", id)
	}
	if inst.state != statePending && inst.state != stateRunning {
		return nil, adminErrorf(http.StatusConflict, "instance %s is %s; only pending or running instances can be interrupted", id, inst.state)
	}
	return inst, nil
}

func (e *Emulator) requireEventQueueLocked() error {
	if e.eventQueue == "" {
		return adminErrorf(http.StatusPreconditionFailed, "no event queue is configured (Options.EventQueue or PUT %sevents/config)", AdminPathPrefix)
	}
	return nil
}

// Interruption is the outcome of InterruptSpot.
type Interruption struct {
	Event       Event     `json:"event"`
	TerminateAt time.Time `json:"terminateAt"`
}

// InterruptSpot sends the two-minute spot interruption warning for a spot
// instance and terminates it after delay (0 = Options.SpotInterruptionDelay).
func (e *Emulator) InterruptSpot(instanceID string, delay time.Duration) (*Interruption, error) {
	e.advance()
	e.mu.Lock()
	defer e.mu.Unlock()
	inst, err := e.liveInstanceLocked(instanceID)
	if err != nil {
		return nil, err
	}
	if inst.capacityType != capacitySpot {
		return nil, adminErrorf(http.StatusConflict, "instance %s is on-demand; EC2 interrupts spot instances only", instanceID)
	}
	if err := e.requireEventQueueLocked(); err != nil {
		return nil, err
	}
	if delay <= 0 {
		delay = e.opts.SpotInterruptionDelay
	}
	now := e.clock.Now()
	ev := e.newEvent(SourceEC2, DetailTypeSpotInterruption, now, []string{zonalInstanceArn(inst)},
		SpotInterruptionDetail{InstanceID: inst.id, InstanceAction: "terminate"})
	e.sendEventLocked(ev)
	inst.interruptionAt = now
	e.scheduleLocked(now.Add(delay), eventInterruption, inst.id)
	return &Interruption{Event: ev, TerminateAt: now.Add(delay)}, nil
}

// RecommendRebalance sends an EC2 Instance Rebalance Recommendation for a
// spot instance. Nothing else happens to the instance.
func (e *Emulator) RecommendRebalance(instanceID string) (*Event, error) {
	e.advance()
	e.mu.Lock()
	defer e.mu.Unlock()
	inst, err := e.liveInstanceLocked(instanceID)
	if err != nil {
		return nil, err
	}
	if inst.capacityType != capacitySpot {
		return nil, adminErrorf(http.StatusConflict, "instance %s is on-demand; rebalance recommendations concern spot instances", instanceID)
	}
	if err := e.requireEventQueueLocked(); err != nil {
		return nil, err
	}
	ev := e.newEvent(SourceEC2, DetailTypeRebalance, e.clock.Now(), []string{zonalInstanceArn(inst)},
		RebalanceRecommendationDetail{InstanceID: inst.id})
	e.sendEventLocked(ev)
	return &ev, nil
}

// ScheduledChange describes an AWS Health scheduled change for an instance.
type ScheduledChange struct {
	// EventTypeCode defaults to AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED.
	EventTypeCode string `json:"eventTypeCode,omitempty"`
	// StartIn is how far from now the maintenance starts (default 24h); it
	// lasts one hour. The emulator does not act on it: the event is the
	// product's cue to replace the node.
	StartIn Duration `json:"startIn,omitempty"`
}

// ScheduleChange sends an AWS Health "scheduledChange" event for an instance.
func (e *Emulator) ScheduleChange(instanceID string, sc ScheduledChange) (*Event, error) {
	e.advance()
	e.mu.Lock()
	defer e.mu.Unlock()
	inst, err := e.liveInstanceLocked(instanceID)
	if err != nil {
		return nil, err
	}
	if err := e.requireEventQueueLocked(); err != nil {
		return nil, err
	}
	code := sc.EventTypeCode
	if code == "" {
		code = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
	}
	startIn := time.Duration(sc.StartIn)
	if startIn <= 0 {
		startIn = 24 * time.Hour
	}
	now := e.clock.Now()
	start := now.Add(startIn)
	ev := e.newEvent(SourceHealth, DetailTypeHealth, now, []string{inst.id}, HealthEventDetail{
		EventArn:          fmt.Sprintf("arn:aws:health:%s::event/EC2/%s/%s_%s", e.opts.Region, code, code, uuid.NewString()),
		Service:           "EC2",
		EventTypeCode:     code,
		EventTypeCategory: "scheduledChange",
		StartTime:         start.UTC().Format(healthTime),
		EndTime:           start.Add(time.Hour).UTC().Format(healthTime),
		EventDescription: []HealthEventDescription{{Language: "en_US",
			LatestDescription: fmt.Sprintf("EC2 has detected degradation of the underlying hardware hosting your instance %s in %s. Your instance will be retired after %s.", inst.id, inst.zone.name, start.UTC().Format(healthTime))}},
		AffectedEntities: []HealthAffectedEntity{{EntityValue: inst.id}},
	})
	e.sendEventLocked(ev)
	return &ev, nil
}

// Duration is a time.Duration that reads and writes JSON as "2m30s" (and
// reads plain numbers as seconds).
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "90s" style strings or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration must be a string like \"2m\" or a number of seconds, got %s", b)
	}
	*d = Duration(time.Duration(secs * float64(time.Second)))
	return nil
}

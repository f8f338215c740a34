package interruption

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/millwright/millwright/workflows"
)

// EventBridge sources and detail types Millwright acts on, as AWS sends them.
const (
	sourceEC2                  = "aws.ec2"
	sourceHealth               = "aws.health"
	detailTypeSpotInterruption = "EC2 Spot Instance Interruption Warning"
	detailTypeRebalance        = "EC2 Instance Rebalance Recommendation"
	detailTypeStateChange      = "EC2 Instance State-change Notification"
	detailTypeHealth           = "AWS Health Event"
)

// SpotInterruptionNotice is how long EC2 gives a spot instance after the
// warning.
const SpotInterruptionNotice = 2 * time.Minute

// event is the EventBridge envelope.
type event struct {
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       time.Time       `json:"time"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

type instanceDetail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
	State          string `json:"state"`
}

type healthDetail struct {
	EventTypeCode    string `json:"eventTypeCode"`
	AffectedEntities []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// Notice is one parsed event: the instances it concerns and the signal their
// node workflows get. An event Millwright ignores has no instances.
type Notice struct {
	InstanceIDs  []string
	Interruption workflows.Interruption
}

// stateChangesThatEndAnInstance are the states after which the node is gone
// or going; pending and running are ignored.
var stateChangesThatEndAnInstance = map[string]bool{
	"stopping": true, "stopped": true, "shutting-down": true, "terminated": true,
}

// ParseMessage reads an SQS message body holding an EventBridge event. An
// unknown or irrelevant event parses to a Notice without instances; only a
// body that is not an event at all is an error.
func ParseMessage(body string) (Notice, error) {
	var ev event
	if err := json.Unmarshal([]byte(body), &ev); err != nil {
		return Notice{}, fmt.Errorf("interruption message is not an EventBridge event: %w", err)
	}
	base := workflows.Interruption{EventID: ev.ID, EventTime: ev.Time}
	switch {
	case ev.Source == sourceEC2 && ev.DetailType == detailTypeSpotInterruption:
		var d instanceDetail
		if err := json.Unmarshal(ev.Detail, &d); err != nil {
			return Notice{}, fmt.Errorf("spot interruption %s: detail: %w", ev.ID, err)
		}
		base.Kind = workflows.InterruptionSpotWarning
		base.Deadline = ev.Time.Add(SpotInterruptionNotice)
		base.Detail = "spot interruption warning, instance-action " + d.InstanceAction
		return Notice{InstanceIDs: nonEmpty(d.InstanceID), Interruption: base}, nil
	case ev.Source == sourceEC2 && ev.DetailType == detailTypeRebalance:
		var d instanceDetail
		if err := json.Unmarshal(ev.Detail, &d); err != nil {
			return Notice{}, fmt.Errorf("rebalance recommendation %s: detail: %w", ev.ID, err)
		}
		base.Kind = workflows.InterruptionRebalance
		base.Detail = "rebalance recommendation"
		return Notice{InstanceIDs: nonEmpty(d.InstanceID), Interruption: base}, nil
	case ev.Source == sourceEC2 && ev.DetailType == detailTypeStateChange:
		var d instanceDetail
		if err := json.Unmarshal(ev.Detail, &d); err != nil {
			return Notice{}, fmt.Errorf("state change %s: detail: %w", ev.ID, err)
		}
		if !stateChangesThatEndAnInstance[d.State] {
			return Notice{}, nil
		}
		base.Kind = workflows.InterruptionStateChange
		base.Detail = "instance state " + d.State
		return Notice{InstanceIDs: nonEmpty(d.InstanceID), Interruption: base}, nil
	case ev.Source == sourceHealth && ev.DetailType == detailTypeHealth:
		var d healthDetail
		if err := json.Unmarshal(ev.Detail, &d); err != nil {
			return Notice{}, fmt.Errorf("health event %s: detail: %w", ev.ID, err)
		}
		base.Kind = workflows.InterruptionScheduledChange
		base.Detail = "scheduled change " + d.EventTypeCode
		var ids []string
		for _, e := range d.AffectedEntities {
			if strings.HasPrefix(e.EntityValue, "i-") {
				ids = append(ids, e.EntityValue)
			}
		}
		return Notice{InstanceIDs: ids, Interruption: base}, nil
	}
	return Notice{}, nil
}

func nonEmpty(id string) []string {
	if id == "" {
		return nil
	}
	return []string{id}
}

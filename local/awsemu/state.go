package awsemu

import (
	"sort"
	"time"

	"github.com/millwright/millwright/local/awsemu/queues"
)

// State is a dump of everything the emulated account holds, for tests and
// `starter sim state`. Terminated instances stay in it forever (unlike
// DescribeInstances), so "nothing leaked" is checkable after the fact.
type State struct {
	Now             time.Time             `json:"now"`
	Instances       []InstanceState       `json:"instances"`
	Fleets          []FleetState          `json:"fleets"`
	LaunchTemplates []LaunchTemplateState `json:"launchTemplates"`
	Queues          []queues.QueueState   `json:"queues"`
	// InstanceProfiles are the IAM instance profiles.
	InstanceProfiles []InstanceProfileState `json:"instanceProfiles,omitempty"`
	Faults           Faults                 `json:"faults"`
	Events           EventConfig            `json:"events"`
}

// InstanceState is one instance in a dump.
type InstanceState struct {
	ID               string            `json:"id"`
	ReservationID    string            `json:"reservationId"`
	State            string            `json:"state"`
	StateSince       time.Time         `json:"stateSince"`
	StateReason      string            `json:"stateReason,omitempty"`
	InstanceType     string            `json:"instanceType"`
	Zone             string            `json:"zone"`
	SubnetID         string            `json:"subnetId"`
	CapacityType     string            `json:"capacityType"`
	ImageID          string            `json:"imageId"`
	PrivateIP        string            `json:"privateIp"`
	PrivateDNSName   string            `json:"privateDnsName"`
	LaunchTime       time.Time         `json:"launchTime"`
	Tags             map[string]string `json:"tags"`
	ClientToken      string            `json:"clientToken,omitempty"`
	FleetID          string            `json:"fleetId,omitempty"`
	LaunchTemplateID string            `json:"launchTemplateId,omitempty"`
	// Node bookkeeping: the Node name (set once running), whether it was
	// created, why not, and whether it was deleted after termination.
	NodeName              string     `json:"nodeName,omitempty"`
	NodeRegistered        bool       `json:"nodeRegistered"`
	NodeRegistrationError string     `json:"nodeRegistrationError,omitempty"`
	NodeDeleted           bool       `json:"nodeDeleted"`
	InterruptedAt         *time.Time `json:"interruptedAt,omitempty"`
}

// FleetState is one CreateFleet call in a dump.
type FleetState struct {
	ID          string            `json:"id"`
	ClientToken string            `json:"clientToken,omitempty"`
	CreatedAt   time.Time         `json:"createdAt"`
	Targets     map[string]int    `json:"targets"`
	Strategies  map[string]string `json:"strategies"`
	InstanceIDs []string          `json:"instanceIds"`
	Errors      []FleetError      `json:"errors,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// FleetError is one entry of a fleet's errors.
type FleetError struct {
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	SubnetID     string `json:"subnetId,omitempty"`
	CapacityType string `json:"capacityType"`
	Code         string `json:"code"`
	Message      string `json:"message"`
}

// LaunchTemplateState is one launch template in a dump.
type LaunchTemplateState struct {
	ID        string             `json:"id"`
	Name      string             `json:"name"`
	CreatedAt time.Time          `json:"createdAt"`
	Tags      map[string]string  `json:"tags,omitempty"`
	Data      LaunchTemplateData `json:"data"`
}

// LiveInstances are those not terminated (pending, running, shutting-down):
// what would still cost money.
func (s *State) LiveInstances() []InstanceState {
	var out []InstanceState
	for _, i := range s.Instances {
		if i.State != stateTerminated {
			out = append(out, i)
		}
	}
	return out
}

// Instance returns the dumped instance with that id.
func (s *State) Instance(id string) (InstanceState, bool) {
	for _, i := range s.Instances {
		if i.ID == id {
			return i, true
		}
	}
	return InstanceState{}, false
}

// State dumps the account after applying the state changes due by now.
func (e *Emulator) State() *State {
	e.advance()
	e.mu.Lock()
	st := &State{Now: e.clock.Now(), Events: EventConfig{Queue: e.eventQueue, StateChangeNotifications: e.stateChanges}}
	for _, id := range e.instanceOrder {
		inst := e.instances[id]
		is := InstanceState{
			ID: inst.id, ReservationID: inst.reservationID, State: inst.state, StateSince: inst.stateSince,
			InstanceType: inst.spec.Name, Zone: inst.zone.name, SubnetID: inst.subnet.id, CapacityType: inst.capacityType,
			ImageID: inst.imageID, PrivateIP: inst.privateIP, PrivateDNSName: inst.privateDNS, LaunchTime: inst.launchTime,
			Tags: copyTags(inst.tags), ClientToken: inst.clientToken, FleetID: inst.fleetID,
			NodeName: inst.nodeName, NodeRegistered: inst.nodeRegistered, NodeRegistrationError: inst.nodeRegisterError,
			NodeDeleted: inst.nodeDeleted,
		}
		if inst.stateReason != nil {
			is.StateReason = inst.stateReason.code
		}
		if inst.template != nil {
			is.LaunchTemplateID = inst.template.id
		}
		if !inst.interruptionAt.IsZero() {
			t := inst.interruptionAt
			is.InterruptedAt = &t
		}
		st.Instances = append(st.Instances, is)
	}
	for _, id := range e.fleetOrder {
		f := e.fleets[id]
		fs := FleetState{ID: f.id, ClientToken: f.clientToken, CreatedAt: f.createdAt, Targets: f.targets, Strategies: f.strategies, Tags: copyTags(f.tags)}
		for _, g := range f.groups {
			fs.InstanceIDs = append(fs.InstanceIDs, g.InstanceIDs...)
		}
		for _, fe := range f.errors {
			o := fe.LaunchTemplateAndOverrides.Overrides
			fs.Errors = append(fs.Errors, FleetError{InstanceType: o.InstanceType, Zone: o.AvailabilityZone, SubnetID: o.SubnetID,
				CapacityType: fe.Lifecycle, Code: fe.ErrorCode, Message: fe.ErrorMessage})
		}
		st.Fleets = append(st.Fleets, fs)
	}
	for _, id := range e.templateOrder {
		lt := e.launchTemplates[id]
		st.LaunchTemplates = append(st.LaunchTemplates, LaunchTemplateState{ID: lt.id, Name: lt.name, CreatedAt: lt.createdAt, Tags: copyTags(lt.tags), Data: lt.data})
	}
	e.mu.Unlock()
	st.Queues = e.sqs.Snapshot()
	st.InstanceProfiles = e.InstanceProfiles()
	st.Faults = e.Faults()
	sort.SliceStable(st.Instances, func(i, j int) bool { return st.Instances[i].LaunchTime.Before(st.Instances[j].LaunchTime) })
	return st
}

// HourlyPrice is what one instance of the offering costs per hour in the
// emulated account: the catalog's on-demand price, or the simulated spot
// price of the zone. False for a type not in the catalog.
func (e *Emulator) HourlyPrice(instanceType, zone, capacityType string) (float64, bool) {
	it, ok := e.opts.Catalog.Get(instanceType)
	if !ok {
		return 0, false
	}
	return e.world.poolPrice(it, zone, capacityType), true
}

// SpotCapacityScore is the simulated depth of the spot pool of
// instanceType in zone, 1 (shallow) to 10 (deep): CreateFleet's
// price-capacity-optimized strategy takes the cheapest pool scoring at
// least 6 before any shallower one.
func (e *Emulator) SpotCapacityScore(instanceType, zone string) int {
	return e.world.spotCapacityScore(instanceType, zone)
}

// InstanceUserData is the base64 userData an instance was launched with.
func (e *Emulator) InstanceUserData(id string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	inst, ok := e.instances[id]
	if !ok {
		return "", false
	}
	return inst.userData, true
}

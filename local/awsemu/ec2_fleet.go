package awsemu

import (
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/millwright/millwright/local/awsemu/ec2query"
)

// fleet is the record of one CreateFleet call (type instant).
type fleet struct {
	id          string
	clientToken string
	createdAt   time.Time
	tags        map[string]string
	// targets per capacity type and the strategy used for each.
	targets    map[string]int
	strategies map[string]string
	errors     []xmlFleetError
	groups     []xmlFleetInstance
}

// fleetPool is one launch candidate: a template config × one of its
// overrides, resolved.
type fleetPool struct {
	order    int // position among all overrides, the tie-breaker
	template *launchTemplate
	ltSpec   xmlFleetLaunchTemplateSpec
	override xmlFleetOverrides
	data     LaunchTemplateData
	launch   launchSpec
	priority float64
	maxPrice float64 // 0 = no limit
	invalid  error   // set when EC2 would reject the override itself
}

// Allocation strategies EC2 Fleet accepts per capacity type.
var (
	spotStrategies     = map[string]bool{"lowest-price": true, "price-capacity-optimized": true, "capacity-optimized": true, "capacity-optimized-prioritized": true, "diversified": true}
	onDemandStrategies = map[string]bool{"lowest-price": true, "prioritized": true}
)

func (e *Emulator) createFleet(c *ec2Call) (any, error) {
	p := c.Params
	token := p.String("ClientToken")
	if err := checkClientToken(token); err != nil {
		return nil, err
	}
	if t := p.String("Type"); t != "instant" {
		return nil, ec2query.InvalidParameterValue("Value (%s) for parameter Type is not supported: the emulator implements instant fleets only (Type=instant)", t)
	}
	tcs := p.Sub("TargetCapacitySpecification")
	total, ok, err := tcs.Int("TotalTargetCapacity")
	if err != nil {
		return nil, err
	} else if !ok {
		return nil, ec2query.MissingParameter("TargetCapacitySpecification.TotalTargetCapacity")
	}
	defaultType := tcs.String("DefaultTargetCapacityType")
	if defaultType != capacitySpot && defaultType != capacityOnDemand {
		return nil, ec2query.InvalidParameterValue("Value (%s) for parameter TargetCapacitySpecification.DefaultTargetCapacityType is invalid; want spot or on-demand", defaultType)
	}
	onDemand, _, err := tcs.Int("OnDemandTargetCapacity")
	if err != nil {
		return nil, err
	}
	spot, _, err := tcs.Int("SpotTargetCapacity")
	if err != nil {
		return nil, err
	}
	if total < 1 || onDemand < 0 || spot < 0 || onDemand+spot > total {
		return nil, ec2query.InvalidParameterValue("TotalTargetCapacity (%d) must be at least 1 and cover OnDemandTargetCapacity (%d) + SpotTargetCapacity (%d)", total, onDemand, spot)
	}
	targets := map[string]int{capacityOnDemand: onDemand, capacitySpot: spot}
	targets[defaultType] += total - onDemand - spot

	strategies := map[string]string{
		capacitySpot:     p.Sub("SpotOptions").String("AllocationStrategy"),
		capacityOnDemand: p.Sub("OnDemandOptions").String("AllocationStrategy"),
	}
	for ct, allowed := range map[string]map[string]bool{capacitySpot: spotStrategies, capacityOnDemand: onDemandStrategies} {
		if strategies[ct] == "" {
			strategies[ct] = "lowest-price"
		}
		if !allowed[strategies[ct]] {
			return nil, ec2query.InvalidParameterValue("Allocation strategy %q is not valid for %s capacity", strategies[ct], ct)
		}
	}
	specs, err := tagSpecifications(p, "TagSpecification")
	if err != nil {
		return nil, err
	}
	configs := p.Members("LaunchTemplateConfigs")
	if len(configs) == 0 {
		return nil, ec2query.MissingParameter("LaunchTemplateConfigs")
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if body, found, err := e.replayLocked(c, token); found {
		return body, err
	}
	f := &fleet{
		id: "fleet-" + uuid.NewString(), clientToken: token, createdAt: e.clock.Now(),
		tags: copyTags(specs["fleet"]), targets: targets, strategies: strategies,
	}
	pools, err := e.fleetPoolsLocked(configs, f, specs["instance"], token)
	if err != nil {
		return nil, err
	}
	for _, pool := range pools {
		if pool.invalid != nil {
			ee := ec2query.AsError(pool.invalid)
			f.errors = append(f.errors, xmlFleetError{
				LaunchTemplateAndOverrides: xmlLaunchTemplateAndOverrides{LaunchTemplateSpecification: pool.ltSpec, Overrides: pool.override},
				Lifecycle:                  defaultType, ErrorCode: ee.Code, ErrorMessage: ee.Message,
			})
		}
	}
	// On-demand first, then spot, as EC2 Fleet fills them independently.
	for _, ct := range []string{capacityOnDemand, capacitySpot} {
		if targets[ct] > 0 {
			if err := e.fillCapacityLocked(f, pools, ct, targets[ct]); err != nil {
				return nil, err
			}
		}
	}
	e.fleets[f.id] = f
	e.fleetOrder = append(e.fleetOrder, f.id)
	render := func(requestID string) any {
		return createFleetResponse{RequestID: requestID, FleetID: f.id, Errors: f.errors, Instances: f.groups}
	}
	e.rememberLocked(c, token, render)
	return render(c.RequestID), nil
}

// fleetPoolsLocked resolves every template config × override into a pool.
// An unknown template or a bad override becomes an invalid pool (reported in
// the response's errors, as EC2 does) rather than failing the call.
func (e *Emulator) fleetPoolsLocked(configs []ec2query.Params, f *fleet, instanceTags map[string]string, token string) ([]*fleetPool, error) {
	var pools []*fleetPool
	for _, cfg := range configs {
		lts := cfg.Sub("LaunchTemplateSpecification")
		spec := xmlFleetLaunchTemplateSpec{
			LaunchTemplateID: lts.String("LaunchTemplateId"), LaunchTemplateName: lts.String("LaunchTemplateName"), Version: lts.String("Version"),
		}
		lt, ltErr := e.resolveTemplateLocked(spec.LaunchTemplateID, spec.LaunchTemplateName, spec.Version)
		overrides := cfg.Members("Overrides")
		if len(overrides) == 0 {
			// No overrides: one pool from the template alone. An empty view
			// (a prefix nothing is under) reads as all-default overrides.
			overrides = []ec2query.Params{cfg.Sub("Overrides.0")}
		}
		for _, o := range overrides {
			pool := &fleetPool{order: len(pools), template: lt, ltSpec: spec}
			pool.override = xmlFleetOverrides{
				InstanceType: o.String("InstanceType"), SubnetID: o.String("SubnetId"),
				AvailabilityZone: o.String("AvailabilityZone"), ImageID: o.String("ImageId"), MaxPrice: o.String("MaxPrice"),
			}
			if s := o.String("Priority"); s != "" {
				pool.override.Priority = &s
			}
			if s := o.String("WeightedCapacity"); s != "" {
				pool.override.WeightedCapacity = &s
			}
			pools = append(pools, pool)
			if ltErr != nil {
				pool.invalid = ltErr
				continue
			}
			if pool.priority, _, pool.invalid = o.Float("Priority"); pool.invalid != nil {
				continue
			}
			if pool.maxPrice, _, pool.invalid = o.Float("MaxPrice"); pool.invalid != nil {
				continue
			}
			if spec.LaunchTemplateID == "" {
				pool.ltSpec.LaunchTemplateID = lt.id
			}
			pool.data = lt.data
			instanceType := firstNonEmpty(pool.override.InstanceType, lt.data.InstanceType)
			imageID := firstNonEmpty(pool.override.ImageID, lt.data.ImageID)
			subnetID := firstNonEmpty(pool.override.SubnetID, lt.data.SubnetID)
			specType, sn, err := e.resolvePool(instanceType, subnetID, pool.override.AvailabilityZone, imageID, lt.data.SecurityGroups)
			if err != nil {
				pool.invalid = err
				continue
			}
			if pool.override.AvailabilityZone == "" {
				pool.override.AvailabilityZone = sn.zone.name
			}
			tags := copyTags(lt.data.InstanceTags)
			for k, v := range instanceTags {
				tags[k] = v
			}
			pool.launch = launchSpec{
				spec: specType, subnet: sn, imageID: imageID, groupIDs: lt.data.SecurityGroups,
				userData: lt.data.UserData, instanceProfile: lt.data.InstanceProfile, tags: tags,
				clientToken: token, fleetID: f.id,
				template: &templateRef{id: lt.id, name: lt.name, version: spec.Version},
			}
		}
	}
	return pools, nil
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// fillCapacityLocked launches count instances of one capacity type, trying
// pools in the order the allocation strategy prefers; an exhausted pool adds
// an InsufficientInstanceCapacity error and the next one is tried.
func (e *Emulator) fillCapacityLocked(f *fleet, pools []*fleetPool, capacityType string, count int) error {
	var candidates []*fleetPool
	for _, p := range pools {
		if p.invalid == nil {
			candidates = append(candidates, p)
		}
	}
	strategy := f.strategies[capacityType]
	e.orderPools(candidates, capacityType, strategy)
	reservationID := newReservationID()
	for _, pool := range candidates {
		if count == 0 {
			return nil
		}
		spec, zoneName := pool.launch.spec, pool.launch.subnet.zone.name
		if e.faults.capacityExhausted(spec.Name, zoneName, capacityType) {
			ice := errInsufficientCapacity(spec.Name, zoneName, e.zonesWithCapacity(spec.Name, capacityType, zoneName))
			f.errors = append(f.errors, pool.fleetError(capacityType, ice.Code, ice.Message))
			continue
		}
		if capacityType == capacitySpot && pool.maxPrice > 0 && e.world.spotPrice(spec, zoneName) > pool.maxPrice {
			f.errors = append(f.errors, pool.fleetError(capacityType, "SpotMaxPriceTooLow",
				"Your Spot request price of "+strconv.FormatFloat(pool.maxPrice, 'f', -1, 64)+" is lower than the minimum required Spot request fulfillment price of "+
					strconv.FormatFloat(e.world.spotPrice(spec, zoneName), 'f', -1, 64)+"."))
			continue
		}
		n := count
		if strategy == "diversified" {
			n = 1 // spread across pools; the loop below comes back round
		}
		ls := pool.launch
		ls.capacityType = capacityType
		ls.reservationID = reservationID
		launched, err := e.launchLocked(ls, n)
		if len(launched) > 0 {
			ids := make([]string, len(launched))
			for i, inst := range launched {
				ids[i] = inst.id
			}
			f.addInstances(pool, capacityType, ids)
			count -= len(launched)
		}
		if err != nil {
			ee := ec2query.AsError(err)
			f.errors = append(f.errors, pool.fleetError(capacityType, ee.Code, ee.Message))
		}
	}
	if count > 0 && strategy == "diversified" && len(f.groups) > 0 {
		// Another round over the pools that launched.
		return e.fillCapacityLocked(f, launchedPools(pools, f, capacityType), capacityType, count)
	}
	return nil
}

func launchedPools(pools []*fleetPool, f *fleet, capacityType string) []*fleetPool {
	var out []*fleetPool
	for _, p := range pools {
		for _, g := range f.groups {
			if g.Lifecycle == capacityType && g.LaunchTemplateAndOverrides.Overrides == p.override {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func (p *fleetPool) fleetError(capacityType, code, message string) xmlFleetError {
	return xmlFleetError{
		LaunchTemplateAndOverrides: xmlLaunchTemplateAndOverrides{LaunchTemplateSpecification: p.ltSpec, Overrides: p.override},
		Lifecycle:                  capacityType, ErrorCode: code, ErrorMessage: message,
	}
}

func (f *fleet) addInstances(p *fleetPool, capacityType string, ids []string) {
	for i := range f.groups {
		g := &f.groups[i]
		if g.Lifecycle == capacityType && g.LaunchTemplateAndOverrides.Overrides == p.override {
			g.InstanceIDs = append(g.InstanceIDs, ids...)
			return
		}
	}
	f.groups = append(f.groups, xmlFleetInstance{
		LaunchTemplateAndOverrides: xmlLaunchTemplateAndOverrides{LaunchTemplateSpecification: p.ltSpec, Overrides: p.override},
		Lifecycle:                  capacityType, InstanceIDs: ids, InstanceType: p.launch.spec.Name,
	})
}

// orderPools sorts candidates by the allocation strategy:
//   - lowest-price: cheapest first (on-demand prices tie across zones; the
//     override order breaks ties);
//   - price-capacity-optimized: deep pools (simulated capacity score ≥ 6)
//     before shallow ones, cheapest first within each;
//   - capacity-optimized: deepest first; capacity-optimized-prioritized and
//     prioritized: lowest Priority first;
//   - diversified: cheapest first, one instance per pool per round.
func (e *Emulator) orderPools(pools []*fleetPool, capacityType, strategy string) {
	price := func(p *fleetPool) float64 {
		return e.world.poolPrice(p.launch.spec, p.launch.subnet.zone.name, capacityType)
	}
	score := func(p *fleetPool) int {
		return e.world.spotCapacityScore(p.launch.spec.Name, p.launch.subnet.zone.name)
	}
	less := func(a, b *fleetPool) bool {
		switch strategy {
		case "price-capacity-optimized":
			deepA, deepB := score(a) >= 6, score(b) >= 6
			if deepA != deepB {
				return deepA
			}
			if price(a) != price(b) {
				return price(a) < price(b)
			}
		case "capacity-optimized":
			if score(a) != score(b) {
				return score(a) > score(b)
			}
		case "capacity-optimized-prioritized", "prioritized":
			if a.priority != b.priority {
				return a.priority < b.priority
			}
		default: // lowest-price, diversified
			if price(a) != price(b) {
				return price(a) < price(b)
			}
		}
		return a.order < b.order
	}
	sort.SliceStable(pools, func(i, j int) bool { return less(pools[i], pools[j]) })
}

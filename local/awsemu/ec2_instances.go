package awsemu

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/millwright/millwright/local/awsemu/ec2query"
	"github.com/millwright/millwright/model/catalog"
)

// launchSpec is everything needed to create instances in one pool, resolved
// from RunInstances parameters or a fleet's template + override.
type launchSpec struct {
	spec            catalog.InstanceTypeSpec
	subnet          *subnet
	capacityType    string
	imageID         string
	groupIDs        []string
	userData        string
	instanceProfile string
	tags            map[string]string
	clientToken     string
	fleetID         string
	template        *templateRef
	reservationID   string
}

// resolvePool checks a candidate (type, subnet, image) as EC2 would before
// launching; the error is the one EC2 gives (per override, in a fleet).
func (e *Emulator) resolvePool(instanceType, subnetID, zoneName, imageID string, groupIDs []string) (catalog.InstanceTypeSpec, *subnet, error) {
	if instanceType == "" {
		return catalog.InstanceTypeSpec{}, nil, ec2query.MissingParameter("InstanceType")
	}
	spec, ok := e.opts.Catalog.Get(instanceType)
	if !ok {
		return catalog.InstanceTypeSpec{}, nil, ec2query.InvalidParameterValue("Invalid value '%s' for InstanceType.", instanceType)
	}
	var sn *subnet
	switch {
	case subnetID != "":
		if sn, ok = e.world.subnetByID(subnetID); !ok {
			return spec, nil, ec2query.Errorf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", subnetID)
		}
		if zoneName != "" && zoneName != sn.zone.name {
			return spec, nil, ec2query.InvalidParameterValue("Subnet %s is in %s, not in the requested zone %s", subnetID, sn.zone.name, zoneName)
		}
	case zoneName != "":
		if sn, ok = e.world.subnetInZone(zoneName); !ok {
			return spec, nil, ec2query.InvalidParameterValue("Invalid availability zone: [%s]", zoneName)
		}
	default:
		sn = e.world.subnets[0]
	}
	if imageID == "" {
		return spec, sn, ec2query.MissingParameter("ImageId")
	}
	im, ok := e.world.imageByID(imageID)
	if !ok {
		return spec, sn, ec2query.Errorf(http.StatusBadRequest, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", imageID)
	}
	if archOfImage(im.arch) != spec.Arch {
		return spec, sn, ec2query.InvalidParameterValue("The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI. Specify an instance type and an AMI that have matching architectures, and try again.",
			ec2Arch(spec.Arch), im.arch)
	}
	for _, g := range groupIDs {
		if _, ok := e.world.groupByID(g); !ok {
			return spec, sn, ec2query.Errorf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist", g)
		}
	}
	return spec, sn, nil
}

func errInsufficientCapacity(instanceType, zoneName string, others []string) *ec2query.Error {
	msg := fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity.", instanceType, zoneName)
	if len(others) > 0 {
		msg += fmt.Sprintf(" You can currently get %s capacity by not specifying an Availability Zone in your request or choosing %s.", instanceType, strings.Join(others, ", "))
	}
	// EC2 reports insufficient capacity as a server error.
	return ec2query.Errorf(http.StatusInternalServerError, "InsufficientInstanceCapacity", "%s", msg)
}

// zonesWithCapacity lists the other zones where the pool is not exhausted,
// for the ICE message.
func (e *Emulator) zonesWithCapacity(instanceType, capacityType, except string) []string {
	var out []string
	for _, z := range e.world.zones {
		if z.name != except && !e.faults.capacityExhausted(instanceType, z.name, capacityType) {
			out = append(out, z.name)
		}
	}
	return out
}

// launchLocked creates count instances from ls, pending, booting after
// BootDelay. e.mu must be held.
func (e *Emulator) launchLocked(ls launchSpec, count int) ([]*instance, error) {
	now := e.clock.Now()
	var out []*instance
	for i := 0; i < count; i++ {
		ip, err := ls.subnet.allocateAddress()
		if err != nil {
			return out, ec2query.Errorf(http.StatusBadRequest, "InsufficientFreeAddressesInSubnet", "%v", err)
		}
		inst := &instance{
			id:              newInstanceID(),
			reservationID:   ls.reservationID,
			spec:            ls.spec,
			zone:            ls.subnet.zone,
			subnet:          ls.subnet,
			capacityType:    ls.capacityType,
			imageID:         ls.imageID,
			groupIDs:        ls.groupIDs,
			privateIP:       ip,
			privateDNS:      e.dnsNameForIP(ip),
			launchTime:      now,
			userData:        ls.userData,
			instanceProfile: ls.instanceProfile,
			clientToken:     ls.clientToken,
			fleetID:         ls.fleetID,
			template:        ls.template,
			tags:            copyTags(ls.tags),
			launchIndex:     i,
			state:           statePending,
			stateSince:      now,
		}
		if len(inst.groupIDs) == 0 {
			inst.groupIDs = []string{e.world.groups[0].id}
		}
		if ls.fleetID != "" {
			inst.tags["aws:ec2:fleet-id"] = ls.fleetID
		}
		if ls.template != nil {
			inst.tags["aws:ec2launchtemplate:id"] = ls.template.id
			inst.tags["aws:ec2launchtemplate:version"] = "1"
		}
		e.instances[inst.id] = inst
		e.instanceOrder = append(e.instanceOrder, inst.id)
		if e.stateChanges {
			e.sendEventLocked(stateChangeEvent(e, inst, now))
		}
		e.scheduleLocked(now.Add(e.opts.BootDelay), eventBoot, inst.id)
		out = append(out, inst)
	}
	return out, nil
}

func (e *Emulator) runInstances(c *ec2Call) (any, error) {
	p := c.Params
	token := p.String("ClientToken")
	if err := checkClientToken(token); err != nil {
		return nil, err
	}
	minCount, ok, err := p.Int("MinCount")
	if err != nil {
		return nil, err
	} else if !ok {
		return nil, ec2query.MissingParameter("MinCount")
	}
	maxCount, ok, err := p.Int("MaxCount")
	if err != nil {
		return nil, err
	} else if !ok {
		return nil, ec2query.MissingParameter("MaxCount")
	}
	if minCount < 1 || maxCount < minCount {
		return nil, ec2query.InvalidParameterValue("MinCount (%d) must be at least 1 and no more than MaxCount (%d)", minCount, maxCount)
	}
	data, err := readLaunchTemplateData(p)
	if err != nil {
		return nil, err
	}
	zoneName := p.Sub("Placement").String("AvailabilityZone")
	subnetID := p.String("SubnetId")

	e.mu.Lock()
	defer e.mu.Unlock()
	if body, found, err := e.replayLocked(c, token); found {
		return body, err
	}
	var ref *templateRef
	if p.Has("LaunchTemplate") {
		lts := p.Sub("LaunchTemplate")
		lt, err := e.resolveTemplateLocked(lts.String("LaunchTemplateId"), lts.String("LaunchTemplateName"), lts.String("Version"))
		if err != nil {
			return nil, err
		}
		ref = &templateRef{id: lt.id, name: lt.name, version: lts.String("Version")}
		data = mergeTemplateData(lt.data, data)
	}
	if subnetID == "" {
		subnetID = data.SubnetID
	}
	spec, sn, err := e.resolvePool(data.InstanceType, subnetID, zoneName, data.ImageID, data.SecurityGroups)
	if err != nil {
		return nil, err
	}
	capacityType := capacityOnDemand
	if data.MarketType == capacitySpot {
		capacityType = capacitySpot
	}
	if e.faults.capacityExhausted(spec.Name, sn.zone.name, capacityType) {
		return nil, errInsufficientCapacity(spec.Name, sn.zone.name, e.zonesWithCapacity(spec.Name, capacityType, sn.zone.name))
	}
	reservationID := newReservationID()
	instances, err := e.launchLocked(launchSpec{
		spec: spec, subnet: sn, capacityType: capacityType, imageID: data.ImageID, groupIDs: data.SecurityGroups,
		userData: data.UserData, instanceProfile: data.InstanceProfile, tags: data.InstanceTags,
		clientToken: token, template: ref, reservationID: reservationID,
	}, maxCount)
	if err != nil && len(instances) < minCount {
		return nil, err
	}
	ids := make([]string, len(instances))
	for i, inst := range instances {
		ids[i] = inst.id
	}
	render := func(requestID string) any {
		resp := runInstancesResponse{RequestID: requestID, ReservationID: reservationID, OwnerID: e.opts.AccountID}
		for _, id := range ids {
			resp.Instances = append(resp.Instances, e.renderInstance(e.instances[id]))
		}
		return resp
	}
	e.rememberLocked(c, token, render)
	return render(c.RequestID), nil
}

// mergeTemplateData overlays call parameters on a template's data: values
// given in the call win, as in EC2.
func mergeTemplateData(base, over LaunchTemplateData) LaunchTemplateData {
	out := base
	if over.ImageID != "" {
		out.ImageID = over.ImageID
	}
	if over.InstanceType != "" {
		out.InstanceType = over.InstanceType
	}
	if over.UserData != "" {
		out.UserData = over.UserData
	}
	if over.InstanceProfile != "" {
		out.InstanceProfile = over.InstanceProfile
	}
	if len(over.SecurityGroups) > 0 {
		out.SecurityGroups = over.SecurityGroups
	}
	if over.SubnetID != "" {
		out.SubnetID = over.SubnetID
	}
	if over.MarketType != "" {
		out.MarketType = over.MarketType
	}
	tags := copyTags(base.InstanceTags)
	for k, v := range over.InstanceTags {
		tags[k] = v
	}
	out.InstanceTags = tags
	return out
}

// visibleLocked reports whether DescribeInstances still shows inst: EC2
// forgets terminated instances after about an hour.
func (e *Emulator) visibleLocked(inst *instance, now time.Time) bool {
	return inst.state != stateTerminated || now.Sub(inst.stateSince) < e.opts.TerminatedRetention
}

func (e *Emulator) instanceFilterValues(inst *instance) filterValues {
	return func(name string) ([]string, bool) {
		switch name {
		case "instance-id":
			return []string{inst.id}, true
		case "instance-state-name":
			return []string{inst.state}, true
		case "instance-state-code":
			return []string{strconv.Itoa(stateCodes[inst.state])}, true
		case "instance-type":
			return []string{inst.spec.Name}, true
		case "availability-zone":
			return []string{inst.zone.name}, true
		case "subnet-id":
			return []string{inst.subnet.id}, true
		case "vpc-id":
			return []string{e.world.vpcID}, true
		case "private-dns-name":
			return []string{inst.privateDNS}, true
		case "private-ip-address":
			return []string{inst.privateIP}, true
		case "image-id":
			return []string{inst.imageID}, true
		case "client-token":
			return []string{inst.clientToken}, true
		case "reservation-id":
			return []string{inst.reservationID}, true
		case "architecture":
			return []string{ec2Arch(inst.spec.Arch)}, true
		case "instance-lifecycle":
			if inst.capacityType == capacitySpot {
				return []string{"spot"}, true
			}
			return nil, true
		case "iam-instance-profile.arn":
			if inst.instanceProfile == "" {
				return nil, true
			}
			return []string{e.instanceProfileArn(inst.instanceProfile)}, true
		}
		return nil, false
	}
}

func (e *Emulator) instanceProfileArn(name string) string {
	return "arn:aws:iam::" + e.opts.AccountID + ":instance-profile/" + name
}

func (e *Emulator) describeInstances(c *ec2Call) (any, error) {
	p := c.Params
	ids := p.Strings("InstanceId")
	if err := checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	if len(ids) > 0 && p.Has("MaxResults") {
		return nil, ec2query.Errorf(http.StatusBadRequest, "InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	pageSize, err := p.MaxResults(5, 1000, 0)
	if err != nil {
		return nil, err
	}
	filters := p.Filters()
	if err := validateFilters(filters, true, e.instanceFilterValues(&instance{subnet: &subnet{}})); err != nil {
		return nil, err
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	var missing []string
	for _, id := range ids {
		if inst, ok := e.instances[id]; !ok || !e.visibleLocked(inst, now) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, errInstanceNotFound(missing)
	}
	var matched []*instance
	for _, id := range e.instanceOrder {
		inst := e.instances[id]
		if !e.visibleLocked(inst, now) || (len(ids) > 0 && !contains(ids, id)) {
			continue
		}
		ok, err := matchFilters(filters, inst.tags, e.instanceFilterValues(inst))
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, inst)
		}
	}
	start, end, next, err := ec2query.Page(c.Action, len(matched), pageSize, p.String("NextToken"))
	if err != nil {
		return nil, err
	}
	resp := describeInstancesResponse{RequestID: c.RequestID, NextToken: next}
	// Instances of one launch share a reservation; keep them together as EC2
	// does (a page boundary may split a reservation, which EC2 also does).
	for _, inst := range matched[start:end] {
		n := len(resp.Reservations)
		if n == 0 || resp.Reservations[n-1].ReservationID != inst.reservationID {
			resp.Reservations = append(resp.Reservations, xmlReservation{ReservationID: inst.reservationID, OwnerID: e.opts.AccountID})
			n++
		}
		resp.Reservations[n-1].Instances = append(resp.Reservations[n-1].Instances, e.renderInstance(inst))
	}
	return resp, nil
}

func (e *Emulator) renderInstance(inst *instance) xmlInstance {
	var groups []xmlGroup
	for _, id := range inst.groupIDs {
		g, _ := e.world.groupByID(id)
		groups = append(groups, xmlGroup{GroupID: id, GroupName: g.name})
	}
	x := xmlInstance{
		InstanceID:         inst.id,
		ImageID:            inst.imageID,
		State:              xmlState{Code: stateCodes[inst.state], Name: inst.state},
		PrivateDNSName:     inst.privateDNS,
		Reason:             inst.transition,
		AmiLaunchIndex:     inst.launchIndex,
		InstanceType:       inst.spec.Name,
		LaunchTime:         ec2query.FormatTime(inst.launchTime),
		Placement:          xmlPlacement{AvailabilityZone: inst.zone.name, AvailabilityZoneID: inst.zone.id, Tenancy: "default"},
		Monitoring:         xmlMonitoring{State: "disabled"},
		SubnetID:           inst.subnet.id,
		VpcID:              e.world.vpcID,
		PrivateIPAddress:   inst.privateIP,
		SourceDestCheck:    true,
		Groups:             groups,
		Architecture:       ec2Arch(inst.spec.Arch),
		RootDeviceType:     "ebs",
		RootDeviceName:     "/dev/xvda",
		VirtualizationType: "hvm",
		ClientToken:        inst.clientToken,
		Tags:               xmlTags(inst.tags),
		Hypervisor:         "xen",
		EbsOptimized:       true,
		EnaSupport:         true,
		MetadataOptions:    xmlMetadataOptions{State: "applied", HTTPTokens: "required", HTTPPutResponseHopLimit: 2, HTTPEndpoint: "enabled", InstanceMetadataTags: "disabled"},
		PlatformDetails:    "Linux/UNIX",
		UsageOperation:     "RunInstances",
		BootMode:           "uefi",
	}
	if inst.state != stateTerminated {
		x.NetworkInterfaces = []xmlNetworkInterface{{
			NetworkInterfaceID: "eni-" + hashHex(17, inst.id, "eni"),
			SubnetID:           inst.subnet.id, VpcID: e.world.vpcID, OwnerID: e.opts.AccountID, Status: "in-use",
			MacAddress:       macFor(inst.id),
			PrivateIPAddress: inst.privateIP, PrivateDNSName: inst.privateDNS, SourceDestCheck: true, Groups: groups,
			PrivateIPAddresses: []xmlPrivateIP{{PrivateIPAddress: inst.privateIP, PrivateDNSName: inst.privateDNS, Primary: true}},
			InterfaceType:      "interface",
		}}
	}
	if inst.stateReason != nil {
		x.StateReason = &xmlStateReason{Code: inst.stateReason.code, Message: inst.stateReason.message}
	}
	if inst.capacityType == capacitySpot {
		x.InstanceLifecycle = "spot"
		x.SpotInstanceRequestID = "sir-" + hashHex(8, inst.id, "sir")
	}
	if inst.instanceProfile != "" {
		x.IamInstanceProfile = &xmlIamInstanceProfile{Arn: e.instanceProfileArn(inst.instanceProfile), ID: "AIPA" + strings.ToUpper(hashHex(17, inst.instanceProfile))}
	}
	return x
}

func macFor(id string) string {
	h := hashHex(10, id, "mac")
	return "02:" + h[0:2] + ":" + h[2:4] + ":" + h[4:6] + ":" + h[6:8] + ":" + h[8:10]
}

func (e *Emulator) terminateInstances(c *ec2Call) (any, error) {
	ids := c.Params.Strings("InstanceId")
	if len(ids) == 0 {
		return nil, ec2query.MissingParameter("InstanceId")
	}
	if err := checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	var missing []string
	for _, id := range ids {
		if inst, ok := e.instances[id]; !ok || !e.visibleLocked(inst, now) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, errInstanceNotFound(missing)
	}
	resp := terminateInstancesResponse{RequestID: c.RequestID}
	for _, id := range ids {
		inst := e.instances[id]
		prev := xmlState{Code: stateCodes[inst.state], Name: inst.state}
		e.beginTerminationLocked(inst, now, reasonUserTerminated)
		resp.Instances = append(resp.Instances, xmlStateChange{InstanceID: id, PreviousState: prev,
			CurrentState: xmlState{Code: stateCodes[inst.state], Name: inst.state}})
	}
	return resp, nil
}

func (e *Emulator) createTags(c *ec2Call) (any, error) {
	ids := c.Params.Strings("ResourceId")
	if len(ids) == 0 {
		return nil, ec2query.MissingParameter("ResourceId")
	}
	tags, err := readTags(c.Params, "Tag")
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	// Check every resource before changing any, so a bad id changes nothing.
	targets := make([]map[string]string, 0, len(ids))
	for _, id := range ids {
		switch {
		case strings.HasPrefix(id, "i-"):
			inst, ok := e.instances[id]
			if !ok || !e.visibleLocked(inst, now) {
				return nil, errInstanceNotFound([]string{id})
			}
			targets = append(targets, inst.tags)
		case strings.HasPrefix(id, "lt-"):
			lt, ok := e.launchTemplates[id]
			if !ok {
				return nil, errTemplateIDNotFound(id)
			}
			targets = append(targets, lt.tags)
		case strings.HasPrefix(id, "fleet-"):
			f, ok := e.fleets[id]
			if !ok {
				return nil, ec2query.Errorf(http.StatusBadRequest, "InvalidFleetId.NotFound", "The fleet ID '%s' does not exist", id)
			}
			targets = append(targets, f.tags)
		default:
			// Subnets, groups and images are the emulator's fixed world and
			// keep the tags they were built with.
			return nil, ec2query.InvalidParameterValue("The emulator tags instances, launch templates and fleets only; %q is none of them", id)
		}
	}
	for _, t := range targets {
		if len(t)+len(tags) > 50+countShared(t, tags) {
			return nil, ec2query.Errorf(http.StatusBadRequest, "TagLimitExceeded", "The maximum number of tags (50) per resource was exceeded")
		}
	}
	for _, t := range targets {
		for k, v := range tags {
			t[k] = v
		}
	}
	return returnResponse{RequestID: c.RequestID, Return: true}, nil
}

func countShared(a, b map[string]string) int {
	n := 0
	for k := range b {
		if _, ok := a[k]; ok {
			n++
		}
	}
	return n
}

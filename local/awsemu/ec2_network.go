package awsemu

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/millwright/millwright/local/awsemu/ec2query"
)

// Handlers for the account's fixed resources: subnets, security groups and
// images.

func (e *Emulator) subnetFilterValues(s *subnet) filterValues {
	return func(name string) ([]string, bool) {
		switch name {
		case "subnet-id":
			return []string{s.id}, true
		case "vpc-id":
			return []string{e.world.vpcID}, true
		case "availability-zone":
			return []string{s.zone.name}, true
		case "availability-zone-id":
			return []string{s.zone.id}, true
		case "cidr-block", "cidr", "cidrBlock":
			return []string{s.cidr}, true
		case "state":
			return []string{"available"}, true
		case "default-for-az", "defaultForAz":
			return []string{"false"}, true
		case "owner-id":
			return []string{e.opts.AccountID}, true
		case "map-public-ip-on-launch":
			return []string{"false"}, true
		}
		return nil, false
	}
}

func (e *Emulator) describeSubnets(c *ec2Call) (any, error) {
	pageSize, err := c.Params.MaxResults(5, 1000, 0)
	if err != nil {
		return nil, err
	}
	ids := c.Params.Strings("SubnetId")
	for _, id := range ids {
		if _, ok := e.world.subnetByID(id); !ok {
			return nil, ec2query.Errorf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	filters := c.Params.Filters()
	if err := validateFilters(filters, true, e.subnetFilterValues(&subnet{})); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var matched []xmlSubnet
	for _, s := range e.world.subnets {
		if len(ids) > 0 && !contains(ids, s.id) {
			continue
		}
		ok, err := matchFilters(filters, s.tags, e.subnetFilterValues(s))
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		matched = append(matched, xmlSubnet{
			SubnetID:                s.id,
			SubnetArn:               fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", e.opts.Region, e.opts.AccountID, s.id),
			State:                   "available",
			VpcID:                   e.world.vpcID,
			OwnerID:                 e.opts.AccountID,
			CidrBlock:               s.cidr,
			AvailableIPAddressCount: s.availableAddresses(),
			AvailabilityZone:        s.zone.name,
			AvailabilityZoneID:      s.zone.id,
			Tags:                    xmlTags(s.tags),
		})
	}
	start, end, next, err := ec2query.Page(c.Action, len(matched), pageSize, c.Params.String("NextToken"))
	if err != nil {
		return nil, err
	}
	return describeSubnetsResponse{RequestID: c.RequestID, Subnets: matched[start:end], NextToken: next}, nil
}

func (e *Emulator) groupFilterValues(g securityGroup) filterValues {
	return func(name string) ([]string, bool) {
		switch name {
		case "group-id":
			return []string{g.id}, true
		case "group-name":
			return []string{g.name}, true
		case "description":
			return []string{g.description}, true
		case "vpc-id":
			return []string{e.world.vpcID}, true
		case "owner-id":
			return []string{e.opts.AccountID}, true
		}
		return nil, false
	}
}

func (e *Emulator) describeSecurityGroups(c *ec2Call) (any, error) {
	pageSize, err := c.Params.MaxResults(5, 1000, 0)
	if err != nil {
		return nil, err
	}
	ids := c.Params.Strings("GroupId")
	names := c.Params.Strings("GroupName")
	for _, id := range ids {
		if _, ok := e.world.groupByID(id); !ok {
			return nil, ec2query.Errorf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	for _, n := range names {
		found := false
		for _, g := range e.world.groups {
			found = found || g.name == n
		}
		if !found {
			return nil, ec2query.Errorf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", n, e.world.vpcID)
		}
	}
	filters := c.Params.Filters()
	if err := validateFilters(filters, true, e.groupFilterValues(securityGroup{})); err != nil {
		return nil, err
	}
	var matched []xmlSecurityGroup
	for _, g := range e.world.groups {
		if len(ids) > 0 && !contains(ids, g.id) {
			continue
		}
		if len(names) > 0 && !contains(names, g.name) {
			continue
		}
		ok, err := matchFilters(filters, g.tags, e.groupFilterValues(g))
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		matched = append(matched, xmlSecurityGroup{
			OwnerID: e.opts.AccountID, GroupID: g.id, GroupName: g.name, GroupDescription: g.description,
			VpcID:            e.world.vpcID,
			SecurityGroupArn: fmt.Sprintf("arn:aws:ec2:%s:%s:security-group/%s", e.opts.Region, e.opts.AccountID, g.id),
			Tags:             xmlTags(g.tags),
		})
	}
	start, end, next, err := ec2query.Page(c.Action, len(matched), pageSize, c.Params.String("NextToken"))
	if err != nil {
		return nil, err
	}
	return describeSecurityGroupsResponse{RequestID: c.RequestID, Groups: matched[start:end], NextToken: next}, nil
}

func (e *Emulator) imageFilterValues(im image) filterValues {
	return func(name string) ([]string, bool) {
		switch name {
		case "name":
			return []string{im.name}, true
		case "image-id":
			return []string{im.id}, true
		case "architecture":
			return []string{im.arch}, true
		case "owner-alias":
			return []string{im.ownerAlias}, true
		case "owner-id":
			return []string{im.ownerID}, true
		case "state":
			return []string{"available"}, true
		case "image-type":
			return []string{"machine"}, true
		case "is-public":
			return []string{"true"}, true
		case "description":
			return []string{im.description}, true
		case "virtualization-type":
			return []string{"hvm"}, true
		case "root-device-type":
			return []string{"ebs"}, true
		case "hypervisor":
			return []string{"xen"}, true
		case "platform-details":
			return []string{imagePlatformDetails(im)}, true
		case "platform":
			return []string{imagePlatform(im)}, true
		}
		return nil, false
	}
}

func (e *Emulator) describeImages(c *ec2Call) (any, error) {
	pageSize, err := c.Params.MaxResults(5, 1000, 0)
	if err != nil {
		return nil, err
	}
	ids := c.Params.Strings("ImageId")
	for _, id := range ids {
		if !strings.HasPrefix(id, "ami-") {
			return nil, ec2query.Errorf(http.StatusBadRequest, "InvalidAMIID.Malformed", "Invalid id: %q (expecting \"ami-...\")", id)
		}
		if _, ok := e.world.imageByID(id); !ok {
			return nil, ec2query.Errorf(http.StatusBadRequest, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
		}
	}
	owners := c.Params.Strings("Owner")
	includeDeprecated, _, err := c.Params.Bool("IncludeDeprecated")
	if err != nil {
		return nil, err
	}
	filters := c.Params.Filters()
	if err := validateFilters(filters, true, e.imageFilterValues(image{})); err != nil {
		return nil, err
	}
	now := e.clock.Now()
	var matched []xmlImage
	for _, im := range e.world.imageList() {
		if len(ids) > 0 && !contains(ids, im.id) {
			continue
		}
		if len(owners) > 0 && !e.imageOwnedByAny(im, owners) {
			continue
		}
		// EC2 hides deprecated images unless asked for them by id or with
		// IncludeDeprecated.
		if len(ids) == 0 && !includeDeprecated && !im.deprecated.After(now) {
			continue
		}
		ok, err := matchFilters(filters, im.tags, e.imageFilterValues(im))
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		matched = append(matched, xmlImage{
			ImageID:         im.id,
			ImageLocation:   "amazon/" + im.name,
			ImageState:      "available",
			ImageOwnerID:    im.ownerID,
			CreationDate:    ec2query.FormatTime(im.created),
			IsPublic:        true,
			Architecture:    im.arch,
			ImageType:       "machine",
			ImageOwnerAlias: im.ownerAlias,
			Name:            im.name,
			Description:     im.description,
			RootDeviceType:  "ebs",
			RootDeviceName:  "/dev/xvda",
			BlockDeviceMapping: []xmlBlockDeviceMapping{{DeviceName: "/dev/xvda", Ebs: xmlEbsBlockDevice{
				SnapshotID: "snap-" + hashHex(17, im.id, "snapshot"), VolumeSize: 20, DeleteOnTermination: true,
				VolumeType: "gp3", Iops: 3000, Throughput: 125,
			}}},
			VirtualizationType: "hvm",
			Tags:               xmlTags(im.tags),
			Hypervisor:         "xen",
			EnaSupport:         true,
			Platform:           imagePlatform(im),
			PlatformDetails:    imagePlatformDetails(im),
			UsageOperation:     "RunInstances",
			BootMode:           map[bool]string{true: "uefi", false: "uefi-preferred"}[im.arch == "arm64"],
			DeprecationTime:    ec2query.FormatTime(im.deprecated),
		})
	}
	start, end, next, err := ec2query.Page(c.Action, len(matched), pageSize, c.Params.String("NextToken"))
	if err != nil {
		return nil, err
	}
	return describeImagesResponse{RequestID: c.RequestID, Images: matched[start:end], NextToken: next}, nil
}

// imagePlatform is EC2's "platform" of an image: "windows" or empty.
func imagePlatform(im image) string {
	if im.os == osWindows {
		return "windows"
	}
	return ""
}

func imagePlatformDetails(im image) string {
	if im.os == osWindows {
		return "Windows"
	}
	return "Linux/UNIX"
}

func (e *Emulator) imageOwnedByAny(im image, owners []string) bool {
	for _, o := range owners {
		switch {
		case o == "self" && im.ownerID == e.opts.AccountID,
			o == im.ownerAlias,
			o == im.ownerID:
			return true
		}
	}
	return false
}

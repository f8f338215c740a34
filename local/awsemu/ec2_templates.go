package awsemu

import (
	"encoding/base64"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/millwright/millwright/local/awsemu/ec2query"
)

// launchTemplate is a launch template with its single version (the emulator
// does not implement CreateLaunchTemplateVersion; version 1 is $Default and
// $Latest).
type launchTemplate struct {
	id, name    string
	createdAt   time.Time
	clientToken string
	tags        map[string]string
	data        LaunchTemplateData
}

// LaunchTemplateData is the part of RequestLaunchTemplateData that shapes an
// instance.
type LaunchTemplateData struct {
	ImageID         string            `json:"imageId,omitempty"`
	InstanceType    string            `json:"instanceType,omitempty"`
	UserData        string            `json:"userData,omitempty"` // base64
	InstanceProfile string            `json:"instanceProfile,omitempty"`
	SecurityGroups  []string          `json:"securityGroupIds,omitempty"`
	SubnetID        string            `json:"subnetId,omitempty"`
	MarketType      string            `json:"marketType,omitempty"`
	InstanceTags    map[string]string `json:"instanceTags,omitempty"`
	HTTPTokens      string            `json:"httpTokens,omitempty"`
	HopLimit        int               `json:"httpPutResponseHopLimit,omitempty"`
}

var launchTemplateNamePattern = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)

// readLaunchTemplateData parses LaunchTemplateData.* (or RunInstances'
// top-level equivalents, which share the names).
func readLaunchTemplateData(p ec2query.Params) (LaunchTemplateData, error) {
	d := LaunchTemplateData{
		ImageID:      p.String("ImageId"),
		InstanceType: p.String("InstanceType"),
		UserData:     p.String("UserData"),
		MarketType:   p.Sub("InstanceMarketOptions").String("MarketType"),
		HTTPTokens:   p.Sub("MetadataOptions").String("HttpTokens"),
	}
	if n, ok, err := p.Sub("MetadataOptions").Int("HttpPutResponseHopLimit"); err != nil {
		return d, err
	} else if ok {
		d.HopLimit = n
	}
	if d.UserData != "" {
		if _, err := base64.StdEncoding.DecodeString(d.UserData); err != nil {
			return d, ec2query.Errorf(http.StatusBadRequest, "InvalidUserData.Malformed", "Invalid BASE64 encoding of user data: %v", err)
		}
	}
	profile := p.Sub("IamInstanceProfile")
	d.InstanceProfile = profile.String("Name")
	if arn := profile.String("Arn"); arn != "" {
		d.InstanceProfile = arn[strings.LastIndex(arn, "/")+1:]
	}
	d.SecurityGroups = p.Strings("SecurityGroupId")
	for _, ni := range p.Members("NetworkInterface") {
		if d.SubnetID == "" {
			d.SubnetID = ni.String("SubnetId")
		}
		d.SecurityGroups = append(d.SecurityGroups, ni.Strings("SecurityGroupId")...)
	}
	if d.MarketType != "" && d.MarketType != capacitySpot {
		return d, ec2query.InvalidParameterValue("Value (%s) for parameter InstanceMarketOptions.MarketType is invalid; the emulator knows 'spot'", d.MarketType)
	}
	specs, err := tagSpecifications(p, "TagSpecification")
	if err != nil {
		return d, err
	}
	d.InstanceTags = specs["instance"]
	return d, nil
}

func errTemplateNameNotFound() error {
	return ec2query.Errorf(http.StatusBadRequest, "InvalidLaunchTemplateName.NotFoundException",
		"At least one of the launch templates specified in the request does not exist.")
}

func errTemplateIDNotFound(id string) error {
	return ec2query.Errorf(http.StatusBadRequest, "InvalidLaunchTemplateId.NotFound",
		"The specified launch template, with template ID %s, does not exist.", id)
}

func (e *Emulator) renderLaunchTemplate(lt *launchTemplate) xmlLaunchTemplate {
	return xmlLaunchTemplate{
		LaunchTemplateID: lt.id, LaunchTemplateName: lt.name,
		CreateTime:           ec2query.FormatTime(lt.createdAt),
		CreatedBy:            "arn:aws:iam::" + e.opts.AccountID + ":user/millwright",
		DefaultVersionNumber: 1, LatestVersionNumber: 1,
		Tags: xmlTags(lt.tags),
	}
}

func (e *Emulator) createLaunchTemplate(c *ec2Call) (any, error) {
	token := c.Params.String("ClientToken")
	if err := checkClientToken(token); err != nil {
		return nil, err
	}
	name := c.Params.String("LaunchTemplateName")
	if name == "" {
		return nil, ec2query.MissingParameter("LaunchTemplateName")
	}
	if !launchTemplateNamePattern.MatchString(name) {
		return nil, ec2query.Errorf(http.StatusBadRequest, "InvalidLaunchTemplateName.MalformedException",
			"A launch template name must be between 3 and 128 characters, and may contain letters, numbers, and the following characters: - ( ) . / _; got %q", name)
	}
	if !c.Params.Has("LaunchTemplateData") {
		return nil, ec2query.MissingParameter("LaunchTemplateData")
	}
	data, err := readLaunchTemplateData(c.Params.Sub("LaunchTemplateData"))
	if err != nil {
		return nil, err
	}
	specs, err := tagSpecifications(c.Params, "TagSpecification")
	if err != nil {
		return nil, err
	}
	for rt := range specs {
		if rt != "launch-template" {
			return nil, ec2query.InvalidParameterValue("TagSpecification resource type %q is not valid for CreateLaunchTemplate (want launch-template)", rt)
		}
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if body, found, err := e.replayLocked(c, token); found {
		return body, err
	}
	for _, lt := range e.launchTemplates {
		if lt.name == name {
			return nil, ec2query.Errorf(http.StatusBadRequest, "InvalidLaunchTemplateName.AlreadyExistsException",
				"Launch template name already in use: %s", name)
		}
	}
	lt := &launchTemplate{
		id: "lt-" + randomHex(17), name: name, createdAt: e.clock.Now(), clientToken: token,
		tags: copyTags(specs["launch-template"]), data: data,
	}
	e.launchTemplates[lt.id] = lt
	e.templateOrder = append(e.templateOrder, lt.id)
	rendered := e.renderLaunchTemplate(lt)
	render := func(requestID string) any {
		return launchTemplateResponse{RequestID: requestID, LaunchTemplate: rendered}
	}
	e.rememberLocked(c, token, render)
	return render(c.RequestID), nil
}

func (e *Emulator) describeLaunchTemplates(c *ec2Call) (any, error) {
	pageSize, err := c.Params.MaxResults(1, 200, 0)
	if err != nil {
		return nil, err
	}
	ids := c.Params.Strings("LaunchTemplateId")
	names := c.Params.Strings("LaunchTemplateName")
	filters := c.Params.Filters()
	values := func(lt *launchTemplate) filterValues {
		return func(name string) ([]string, bool) {
			switch name {
			case "launch-template-name":
				return []string{lt.name}, true
			case "create-time":
				return []string{ec2query.FormatTime(lt.createdAt)}, true
			}
			return nil, false
		}
	}
	if err := validateFilters(filters, true, values(&launchTemplate{})); err != nil {
		return nil, err
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		if _, ok := e.launchTemplates[id]; !ok {
			return nil, errTemplateIDNotFound(id)
		}
	}
	for _, n := range names {
		if e.templateByNameLocked(n) == nil {
			return nil, errTemplateNameNotFound()
		}
	}
	var matched []xmlLaunchTemplate
	for _, id := range e.templateOrder {
		lt := e.launchTemplates[id]
		if len(ids) > 0 && !contains(ids, lt.id) {
			continue
		}
		if len(names) > 0 && !contains(names, lt.name) {
			continue
		}
		ok, err := matchFilters(filters, lt.tags, values(lt))
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, e.renderLaunchTemplate(lt))
		}
	}
	start, end, next, err := ec2query.Page(c.Action, len(matched), pageSize, c.Params.String("NextToken"))
	if err != nil {
		return nil, err
	}
	return describeLaunchTemplatesResponse{RequestID: c.RequestID, LaunchTemplates: matched[start:end], NextToken: next}, nil
}

func (e *Emulator) templateByNameLocked(name string) *launchTemplate {
	for _, lt := range e.launchTemplates {
		if lt.name == name {
			return lt
		}
	}
	return nil
}

// resolveTemplateLocked finds the template an id or name refers to, checking
// the version (only 1, $Default and $Latest exist).
func (e *Emulator) resolveTemplateLocked(id, name, version string) (*launchTemplate, error) {
	var lt *launchTemplate
	switch {
	case id != "":
		lt = e.launchTemplates[id]
		if lt == nil {
			return nil, errTemplateIDNotFound(id)
		}
	case name != "":
		lt = e.templateByNameLocked(name)
		if lt == nil {
			return nil, errTemplateNameNotFound()
		}
	default:
		return nil, ec2query.MissingParameter("LaunchTemplateId or LaunchTemplateName")
	}
	switch version {
	case "", "$Default", "$Latest", "1":
		return lt, nil
	}
	return nil, ec2query.Errorf(http.StatusBadRequest, "InvalidLaunchTemplateId.VersionNotFound",
		"Could not find launch template version %s for launch template %s (the emulator keeps version 1 only)", version, lt.id)
}

func (e *Emulator) deleteLaunchTemplate(c *ec2Call) (any, error) {
	id := c.Params.String("LaunchTemplateId")
	name := c.Params.String("LaunchTemplateName")
	e.mu.Lock()
	defer e.mu.Unlock()
	lt, err := e.resolveTemplateLocked(id, name, "")
	if err != nil {
		return nil, err
	}
	delete(e.launchTemplates, lt.id)
	for i, tid := range e.templateOrder {
		if tid == lt.id {
			e.templateOrder = append(e.templateOrder[:i], e.templateOrder[i+1:]...)
			break
		}
	}
	return launchTemplateResponse{RequestID: c.RequestID, LaunchTemplate: e.renderLaunchTemplate(lt)}, nil
}

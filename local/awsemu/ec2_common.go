package awsemu

import (
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/millwright/millwright/local/awsemu/ec2query"
)

func init() {
	for name, h := range map[string]ec2Handler{
		"DescribeAvailabilityZones":     (*Emulator).describeAvailabilityZones,
		"DescribeInstanceTypes":         (*Emulator).describeInstanceTypes,
		"DescribeInstanceTypeOfferings": (*Emulator).describeInstanceTypeOfferings,
		"DescribeSpotPriceHistory":      (*Emulator).describeSpotPriceHistory,
		"DescribeSubnets":               (*Emulator).describeSubnets,
		"DescribeSecurityGroups":        (*Emulator).describeSecurityGroups,
		"DescribeImages":                (*Emulator).describeImages,
		"CreateLaunchTemplate":          (*Emulator).createLaunchTemplate,
		"DescribeLaunchTemplates":       (*Emulator).describeLaunchTemplates,
		"DeleteLaunchTemplate":          (*Emulator).deleteLaunchTemplate,
		"CreateFleet":                   (*Emulator).createFleet,
		"RunInstances":                  (*Emulator).runInstances,
		"DescribeInstances":             (*Emulator).describeInstances,
		"TerminateInstances":            (*Emulator).terminateInstances,
		"CreateTags":                    (*Emulator).createTags,
	} {
		ec2Actions[name] = h
	}
}

// filterValues returns a resource's values for a filter name; known is false
// for a filter the resource type does not support.
type filterValues func(name string) (values []string, known bool)

// matchFilters applies EC2 filter semantics: every filter must match (AND),
// any of a filter's values may match (OR), wildcards allowed. tags answers
// the tag:KEY, tag-key and tag-value filters when non-nil.
func matchFilters(filters []ec2query.Filter, tags map[string]string, get filterValues) (bool, error) {
	for _, f := range filters {
		var values []string
		switch {
		case tags != nil && strings.HasPrefix(f.Name, "tag:"):
			if v, ok := tags[strings.TrimPrefix(f.Name, "tag:")]; ok {
				values = []string{v}
			}
		case tags != nil && f.Name == "tag-key":
			for k := range tags {
				values = append(values, k)
			}
		case tags != nil && f.Name == "tag-value":
			for _, v := range tags {
				values = append(values, v)
			}
		default:
			var known bool
			values, known = get(f.Name)
			if !known {
				return false, ec2query.Errorf(http.StatusBadRequest, "InvalidParameterValue", "The filter '%s' is invalid", f.Name)
			}
		}
		matched := false
		for _, v := range values {
			if f.MatchAny(v) {
				matched = true
				break
			}
		}
		if !matched {
			return false, nil
		}
	}
	return true, nil
}

// validateFilters rejects unknown filter names up front even when nothing is
// there to filter (EC2 does), using a sample resource's filterValues.
func validateFilters(filters []ec2query.Filter, allowTags bool, get filterValues) error {
	for _, f := range filters {
		if allowTags && (strings.HasPrefix(f.Name, "tag:") || f.Name == "tag-key" || f.Name == "tag-value") {
			continue
		}
		if _, known := get(f.Name); !known {
			return ec2query.Errorf(http.StatusBadRequest, "InvalidParameterValue", "The filter '%s' is invalid", f.Name)
		}
	}
	return nil
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func xmlTags(tags map[string]string) []xmlTag {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]xmlTag, 0, len(keys))
	for _, k := range keys {
		out = append(out, xmlTag{Key: k, Value: tags[k]})
	}
	return out
}

func copyTags(tags map[string]string) map[string]string {
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		out[k] = v
	}
	return out
}

// tagSpecifications reads TagSpecification.N (ResourceType + Tag.M) into tags
// per resource type, validating keys as EC2 does.
func tagSpecifications(p ec2query.Params, name string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for i, spec := range p.Members(name) {
		rt := spec.String("ResourceType")
		if rt == "" {
			return nil, ec2query.InvalidParameterValue("%s.%d.ResourceType is required", name, i+1)
		}
		tags, err := readTags(spec, "Tag")
		if err != nil {
			return nil, err
		}
		if out[rt] == nil {
			out[rt] = map[string]string{}
		}
		for k, v := range tags {
			out[rt][k] = v
		}
	}
	return out, nil
}

// readTags reads a Tag.N list of Key/Value.
func readTags(p ec2query.Params, name string) (map[string]string, error) {
	tags := map[string]string{}
	for i, t := range p.Members(name) {
		k := t.String("Key")
		if k == "" {
			return nil, ec2query.InvalidParameterValue("Tag key (%s.%d.Key) must not be empty", name, i+1)
		}
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			return nil, ec2query.InvalidParameterValue("Tag keys starting with 'aws:' are reserved for internal use (got %q)", k)
		}
		if len(k) > 128 || len(t.String("Value")) > 256 {
			return nil, ec2query.InvalidParameterValue("Tag %q is too long: keys are at most 128 characters, values 256", k)
		}
		tags[k] = t.String("Value")
	}
	if len(tags) > 50 {
		return nil, ec2query.Errorf(http.StatusBadRequest, "TagLimitExceeded", "The maximum number of tags (50) per resource was exceeded (%d)", len(tags))
	}
	return tags, nil
}

var instanceIDPattern = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)

func errInstanceNotFound(ids []string) error {
	if len(ids) == 1 {
		return ec2query.Errorf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", ids[0])
	}
	return ec2query.Errorf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(ids, ", "))
}

func checkInstanceIDs(ids []string) error {
	for _, id := range ids {
		if !instanceIDPattern.MatchString(id) {
			return ec2query.Errorf(http.StatusBadRequest, "InvalidInstanceID.Malformed", "Invalid id: %q (expecting \"i-...\")", id)
		}
	}
	return nil
}

// --- ClientToken idempotency -------------------------------------------

// idempotentCall remembers a successful call made with a ClientToken: the
// parameters it had and how to answer it again.
type idempotentCall struct {
	fingerprint string
	render      func(requestID string) any
}

// idempotencyKey scopes tokens per action, as EC2 does.
func idempotencyKey(action, token string) string { return action + "\x00" + token }

// replayLocked answers a repeated ClientToken: the original result when the
// parameters are the same, IdempotentParameterMismatch when they differ.
// found is false for a new token.
func (e *Emulator) replayLocked(c *ec2Call, token string) (body any, found bool, err error) {
	if token == "" {
		return nil, false, nil
	}
	prev, ok := e.idempotency[idempotencyKey(c.Action, token)]
	if !ok {
		return nil, false, nil
	}
	if prev.fingerprint != c.Params.Canonical("Action", "Version", "ClientToken") {
		return nil, true, ec2query.Errorf(http.StatusBadRequest, "IdempotentParameterMismatch",
			"Client token %q was already used for a %s call with different parameters", token, c.Action)
	}
	return prev.render(c.RequestID), true, nil
}

func (e *Emulator) rememberLocked(c *ec2Call, token string, render func(requestID string) any) {
	if token == "" {
		return
	}
	e.idempotency[idempotencyKey(c.Action, token)] = &idempotentCall{
		fingerprint: c.Params.Canonical("Action", "Version", "ClientToken"),
		render:      render,
	}
}

func checkClientToken(token string) error {
	if len(token) > 64 {
		return ec2query.InvalidParameterValue("ClientToken %q is longer than 64 characters", token)
	}
	return nil
}

func archOfImage(arch string) string {
	if arch == "arm64" {
		return "arm64"
	}
	return "amd64"
}

func ec2Arch(catalogArch string) string {
	if catalogArch == "arm64" {
		return "arm64"
	}
	return "x86_64"
}

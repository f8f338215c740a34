package awsemu

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/millwright/millwright/local/awsemu/ec2query"
)

// IAM over the Query protocol, the part a node autoscaler needs: instance
// profiles (create, get, list, tag, add and remove a role, delete) around
// the account's roles (Options.Roles). IAM is a global service; the SDK
// signs its calls for the iam service, which is how they are told from EC2
// calls on the same server.

const iamNamespace = "https://iam.amazonaws.com/doc/2010-05-08/"

func isIAMRequest(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Authorization"), "/iam/aws4_request")
}

// iamState is the account's IAM: fixed roles and the instance profiles.
type iamState struct {
	mu       sync.Mutex
	roles    map[string]iamRole
	profiles map[string]*instanceProfile
}

type iamRole struct {
	name, id, arn string
	created       time.Time
}

type instanceProfile struct {
	name, id, path, arn string
	created             time.Time
	roles               []string
	tags                map[string]string
}

// InstanceProfileState is one instance profile in a dump.
type InstanceProfileState struct {
	Name  string            `json:"name"`
	Path  string            `json:"path"`
	Roles []string          `json:"roles,omitempty"`
	Tags  map[string]string `json:"tags,omitempty"`
}

func newIAMState(opts Options, now time.Time) *iamState {
	s := &iamState{roles: map[string]iamRole{}, profiles: map[string]*instanceProfile{}}
	for _, name := range opts.Roles {
		s.roles[name] = iamRole{
			name: name, id: "AROA" + strings.ToUpper(hashHex(17, opts.AccountID, "role", name)),
			arn: fmt.Sprintf("arn:aws:iam::%s:role/%s", opts.AccountID, name), created: now,
		}
	}
	return s
}

// InstanceProfiles lists the instance profiles, sorted by name.
func (e *Emulator) InstanceProfiles() []InstanceProfileState {
	e.iam.mu.Lock()
	defer e.iam.mu.Unlock()
	out := make([]InstanceProfileState, 0, len(e.iam.profiles))
	for _, p := range e.iam.profiles {
		out = append(out, InstanceProfileState{Name: p.name, Path: p.path, Roles: append([]string(nil), p.roles...), Tags: copyTags(p.tags)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

type xmlIAMTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type xmlIAMRole struct {
	Path       string `xml:"Path"`
	RoleName   string `xml:"RoleName"`
	RoleID     string `xml:"RoleId"`
	Arn        string `xml:"Arn"`
	CreateDate string `xml:"CreateDate"`
}

type xmlInstanceProfile struct {
	InstanceProfileID   string       `xml:"InstanceProfileId"`
	InstanceProfileName string       `xml:"InstanceProfileName"`
	Path                string       `xml:"Path"`
	Arn                 string       `xml:"Arn"`
	CreateDate          string       `xml:"CreateDate"`
	Roles               []xmlIAMRole `xml:"Roles>member"`
	Tags                []xmlIAMTag  `xml:"Tags>member,omitempty"`
}

type iamError struct {
	status        int
	code, message string
}

func (e *Emulator) serveIAM(w http.ResponseWriter, r *http.Request) {
	requestID := newRequestID()
	if err := r.ParseForm(); err != nil {
		writeIAMError(w, requestID, &iamError{http.StatusBadRequest, "MalformedInput", err.Error()})
		return
	}
	params := ec2query.NewParams(r.Form)
	action := params.String("Action")
	s := e.iam
	s.mu.Lock()
	result, apiErr := s.handle(e, action, params)
	s.mu.Unlock()
	if apiErr != nil {
		writeIAMError(w, requestID, apiErr)
		return
	}
	type metadata struct {
		RequestID string `xml:"RequestId"`
	}
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	fmt.Fprintf(&buf, `<%sResponse xmlns="%s">`, action, iamNamespace)
	if result != nil {
		enc := xml.NewEncoder(&buf)
		if err := enc.EncodeElement(result, xml.StartElement{Name: xml.Name{Local: action + "Result"}}); err != nil {
			writeIAMError(w, requestID, &iamError{http.StatusInternalServerError, "ServiceFailure", err.Error()})
			return
		}
	}
	md, _ := xml.Marshal(struct {
		XMLName xml.Name `xml:"ResponseMetadata"`
		metadata
	}{metadata: metadata{RequestID: requestID}})
	buf.Write(md)
	fmt.Fprintf(&buf, "</%sResponse>", action)
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

func writeIAMError(w http.ResponseWriter, requestID string, e *iamError) {
	kind := "Sender"
	if e.status >= 500 {
		kind = "Receiver"
	}
	body, _ := xml.Marshal(struct {
		XMLName   xml.Name `xml:"ErrorResponse"`
		Xmlns     string   `xml:"xmlns,attr"`
		Type      string   `xml:"Error>Type"`
		Code      string   `xml:"Error>Code"`
		Message   string   `xml:"Error>Message"`
		RequestID string   `xml:"RequestId"`
	}{Xmlns: iamNamespace, Type: kind, Code: e.code, Message: e.message, RequestID: requestID})
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}

func noSuchProfile(name string) *iamError {
	return &iamError{http.StatusNotFound, "NoSuchEntity", fmt.Sprintf("Instance Profile %s cannot be found.", name)}
}

func (s *iamState) handle(e *Emulator, action string, p ec2query.Params) (any, *iamError) {
	name := p.String("InstanceProfileName")
	if action != "ListInstanceProfiles" && name == "" {
		return nil, &iamError{http.StatusBadRequest, "ValidationError", "1 validation error detected: Value null at 'instanceProfileName' failed to satisfy constraint: Member must not be null"}
	}
	profile := s.profiles[name]
	switch action {
	case "CreateInstanceProfile":
		if profile != nil {
			return nil, &iamError{http.StatusConflict, "EntityAlreadyExists", fmt.Sprintf("Instance Profile %s already exists.", name)}
		}
		if len(name) > 128 {
			return nil, &iamError{http.StatusBadRequest, "ValidationError", "instanceProfileName must be at most 128 characters"}
		}
		path := p.String("Path")
		if path == "" {
			path = "/"
		}
		if !strings.HasPrefix(path, "/") || !strings.HasSuffix(path, "/") {
			return nil, &iamError{http.StatusBadRequest, "ValidationError", fmt.Sprintf("path %q must begin and end with /", path)}
		}
		profile = &instanceProfile{
			name: name, path: path, created: e.clock.Now().UTC(),
			id:   "AIPA" + strings.ToUpper(hashHex(17, e.opts.AccountID, "instance-profile", name, randomHex(8))),
			arn:  fmt.Sprintf("arn:aws:iam::%s:instance-profile%s%s", e.opts.AccountID, path, name),
			tags: iamTags(p),
		}
		s.profiles[name] = profile
		return struct {
			InstanceProfile xmlInstanceProfile `xml:"InstanceProfile"`
		}{s.xml(profile)}, nil
	case "ListInstanceProfiles":
		prefix := p.String("PathPrefix")
		names := make([]string, 0, len(s.profiles))
		for n, ip := range s.profiles {
			if strings.HasPrefix(ip.path, prefix) {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		out := struct {
			InstanceProfiles []xmlInstanceProfile `xml:"InstanceProfiles>member"`
			IsTruncated      bool                 `xml:"IsTruncated"`
		}{}
		for _, n := range names {
			out.InstanceProfiles = append(out.InstanceProfiles, s.xml(s.profiles[n]))
		}
		return out, nil
	}
	if profile == nil {
		return nil, noSuchProfile(name)
	}
	switch action {
	case "GetInstanceProfile":
		return struct {
			InstanceProfile xmlInstanceProfile `xml:"InstanceProfile"`
		}{s.xml(profile)}, nil
	case "TagInstanceProfile":
		for k, v := range iamTags(p) {
			profile.tags[k] = v
		}
		return nil, nil
	case "AddRoleToInstanceProfile":
		role := p.String("RoleName")
		if _, ok := s.roles[role]; !ok {
			return nil, &iamError{http.StatusNotFound, "NoSuchEntity", fmt.Sprintf("The role with name %s cannot be found.", role)}
		}
		if len(profile.roles) > 0 {
			return nil, &iamError{http.StatusConflict, "LimitExceeded", "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1"}
		}
		profile.roles = []string{role}
		return nil, nil
	case "RemoveRoleFromInstanceProfile":
		role := p.String("RoleName")
		if len(profile.roles) == 0 || profile.roles[0] != role {
			return nil, &iamError{http.StatusNotFound, "NoSuchEntity", fmt.Sprintf("The role with name %s is not in instance profile %s.", role, name)}
		}
		profile.roles = nil
		return nil, nil
	case "DeleteInstanceProfile":
		if len(profile.roles) > 0 {
			return nil, &iamError{http.StatusConflict, "DeleteConflict", "Cannot delete entity, must remove roles from instance profile first."}
		}
		delete(s.profiles, name)
		return nil, nil
	}
	return nil, &iamError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("The emulator does not implement IAM action %q", action)}
}

func iamTags(p ec2query.Params) map[string]string {
	tags := map[string]string{}
	for _, m := range p.Members("Tags.member") {
		tags[m.String("Key")] = m.String("Value")
	}
	return tags
}

func (s *iamState) xml(ip *instanceProfile) xmlInstanceProfile {
	out := xmlInstanceProfile{
		InstanceProfileID: ip.id, InstanceProfileName: ip.name, Path: ip.path, Arn: ip.arn,
		CreateDate: ec2query.FormatTime(ip.created),
	}
	for _, name := range ip.roles {
		role := s.roles[name]
		out.Roles = append(out.Roles, xmlIAMRole{Path: "/", RoleName: role.name, RoleID: role.id, Arn: role.arn, CreateDate: ec2query.FormatTime(role.created)})
	}
	keys := make([]string, 0, len(ip.tags))
	for k := range ip.tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.Tags = append(out.Tags, xmlIAMTag{Key: k, Value: ip.tags[k]})
	}
	return out
}

// Package ec2query owns the wire format of the EC2 Query protocol as the
// emulator serves it: reading the form-encoded request that aws-sdk-go-v2's
// ec2query serializer sends (Action, Version, flattened lists such as
// `Filter.1.Value.2`), writing the XML response envelope in the
// 2016-11-15 namespace, error responses, filter matching and opaque
// pagination tokens.
//
// It knows nothing about instances or fleets; the emulator's handlers decide
// what to answer. It must not grow service behaviour.
package ec2query

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Namespace is the XML namespace of every EC2 response body.
const Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// APIVersion is the only API version the SDK sends and the emulator accepts.
const APIVersion = "2016-11-15"

// TimeFormat is how EC2 writes timestamps (ISO 8601, milliseconds, UTC).
const TimeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime renders t as EC2 does.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Error is an EC2 API error: a code the SDK surfaces as the error code
// (smithy.APIError.ErrorCode), a message, and the HTTP status EC2 uses for it.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf builds an Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidParameterValue is the error EC2 gives for a malformed or out-of-range
// parameter; the message names the parameter.
func InvalidParameterValue(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, "InvalidParameterValue", format, args...)
}

// MissingParameter is the error for an absent required parameter.
func MissingParameter(name string) *Error {
	return Errorf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter %s", name)
}

// AsError returns err as an *Error, wrapping anything else as an InternalError.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Errorf(http.StatusInternalServerError, "InternalError", "%v", err)
}

// Request is one decoded EC2 Query call.
type Request struct {
	Action  string
	Version string
	Params  Params
}

// ParseRequest reads the form body (or query string) of an EC2 Query call.
func ParseRequest(r *http.Request) (*Request, error) {
	if err := r.ParseForm(); err != nil {
		return nil, InvalidParameterValue("cannot parse the request form: %v", err)
	}
	action := r.Form.Get("Action")
	if action == "" {
		return nil, MissingParameter("Action")
	}
	version := r.Form.Get("Version")
	if version != "" && version != APIVersion {
		return nil, Errorf(http.StatusBadRequest, "InvalidParameterValue",
			"API version %q is not supported by this emulator; use %s", version, APIVersion)
	}
	return &Request{Action: action, Version: version, Params: Params{values: r.Form}}, nil
}

// Params is a view of the request's form values under a key prefix, so that
// nested structures (`LaunchTemplateConfigs.1.Overrides.2.InstanceType`) are
// read with the same calls as top-level ones.
type Params struct {
	values url.Values
	prefix string
}

// NewParams wraps raw form values (used by tests and by idempotency hashing).
func NewParams(values url.Values) Params { return Params{values: values} }

func (p Params) key(name string) string {
	if p.prefix == "" {
		return name
	}
	return p.prefix + "." + name
}

// Has reports whether name, or anything nested under it, is present.
func (p Params) Has(name string) bool {
	k := p.key(name)
	if _, ok := p.values[k]; ok {
		return true
	}
	for key := range p.values {
		if strings.HasPrefix(key, k+".") {
			return true
		}
	}
	return false
}

// String returns the value of name, or "".
func (p Params) String(name string) string { return p.values.Get(p.key(name)) }

// Int returns name as an int; ok is false when absent.
func (p Params) Int(name string) (v int, ok bool, err error) {
	s := p.String(name)
	if s == "" {
		return 0, false, nil
	}
	v, err = strconv.Atoi(s)
	if err != nil {
		return 0, true, InvalidParameterValue("Value (%s) for parameter %s is invalid: not an integer", s, p.key(name))
	}
	return v, true, nil
}

// Float returns name as a float64; ok is false when absent.
func (p Params) Float(name string) (v float64, ok bool, err error) {
	s := p.String(name)
	if s == "" {
		return 0, false, nil
	}
	v, err = strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, true, InvalidParameterValue("Value (%s) for parameter %s is invalid: not a number", s, p.key(name))
	}
	return v, true, nil
}

// Bool returns name as a bool; ok is false when absent.
func (p Params) Bool(name string) (v bool, ok bool, err error) {
	s := p.String(name)
	if s == "" {
		return false, false, nil
	}
	v, err = strconv.ParseBool(s)
	if err != nil {
		return false, true, InvalidParameterValue("Value (%s) for parameter %s is invalid: not a boolean", s, p.key(name))
	}
	return v, true, nil
}

// Time returns name as an ISO 8601 timestamp; ok is false when absent.
func (p Params) Time(name string) (t time.Time, ok bool, err error) {
	s := p.String(name)
	if s == "" {
		return time.Time{}, false, nil
	}
	for _, layout := range []string{time.RFC3339Nano, TimeFormat, time.RFC3339} {
		if t, err = time.Parse(layout, s); err == nil {
			return t, true, nil
		}
	}
	return time.Time{}, true, InvalidParameterValue("Value (%s) for parameter %s is invalid: not an ISO 8601 timestamp", s, p.key(name))
}

// Sub returns the view of the structure nested under name.
func (p Params) Sub(name string) Params { return Params{values: p.values, prefix: p.key(name)} }

// Members returns the elements of the flattened list name (name.1, name.2, …)
// in index order. The SDK numbers from 1 without gaps; gaps are tolerated.
func (p Params) Members(name string) []Params {
	indexes := p.indexes(name)
	out := make([]Params, 0, len(indexes))
	for _, i := range indexes {
		out = append(out, p.Sub(name+"."+strconv.Itoa(i)))
	}
	return out
}

// Strings returns the scalar elements of the flattened list name.
func (p Params) Strings(name string) []string {
	indexes := p.indexes(name)
	out := make([]string, 0, len(indexes))
	for _, i := range indexes {
		out = append(out, p.String(name+"."+strconv.Itoa(i)))
	}
	return out
}

func (p Params) indexes(name string) []int {
	base := p.key(name) + "."
	seen := map[int]bool{}
	for key := range p.values {
		rest, ok := strings.CutPrefix(key, base)
		if !ok {
			continue
		}
		head, _, _ := strings.Cut(rest, ".")
		if i, err := strconv.Atoi(head); err == nil {
			seen[i] = true
		}
	}
	out := make([]int, 0, len(seen))
	for i := range seen {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// Canonical renders every parameter except the listed ones as a stable
// string, used to compare two calls that share a ClientToken.
func (p Params) Canonical(except ...string) string {
	skip := map[string]bool{}
	for _, e := range except {
		skip[e] = true
	}
	keys := make([]string, 0, len(p.values))
	for k := range p.values {
		if !skip[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		for _, v := range p.values[k] {
			b.WriteString(url.QueryEscape(k))
			b.WriteByte('=')
			b.WriteString(url.QueryEscape(v))
			b.WriteByte('&')
		}
	}
	return b.String()
}

// Filter is one `Filter.N` of a Describe call: a name and the values any of
// which may match.
type Filter struct {
	Name   string
	Values []string
}

// Filters reads the Filter.N list.
func (p Params) Filters() []Filter {
	var out []Filter
	for _, f := range p.Members("Filter") {
		out = append(out, Filter{Name: f.String("Name"), Values: f.Strings("Value")})
	}
	return out
}

// MatchAny reports whether any filter value matches s, honouring EC2's
// wildcards (`*` any run of characters, `?` one character).
func (f Filter) MatchAny(s string) bool {
	for _, v := range f.Values {
		if MatchWildcard(v, s) {
			return true
		}
	}
	return false
}

// MatchWildcard matches s against an EC2 filter pattern: `*` matches any run
// of characters, `?` exactly one, and a backslash makes the next character
// literal. Hand-written because path.Match treats '/' and '[' specially and
// EC2 patterns (image names, tag values) contain both.
func MatchWildcard(pattern, s string) bool {
	if !strings.ContainsAny(pattern, "*?\\") {
		return pattern == s
	}
	type token struct {
		literal rune
		kind    byte // 'l' literal, '*' any run, '?' one
	}
	var toks []token
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		switch {
		case rs[i] == '\\' && i+1 < len(rs):
			i++
			toks = append(toks, token{literal: rs[i], kind: 'l'})
		case rs[i] == '*':
			toks = append(toks, token{kind: '*'})
		case rs[i] == '?':
			toks = append(toks, token{kind: '?'})
		default:
			toks = append(toks, token{literal: rs[i], kind: 'l'})
		}
	}
	text := []rune(s)
	// match[j] is true when the tokens seen so far can consume text[:j].
	match := make([]bool, len(text)+1)
	match[0] = true
	for _, t := range toks {
		next := make([]bool, len(text)+1)
		for j := 0; j <= len(text); j++ {
			switch t.kind {
			case '*':
				next[j] = match[j] || (j > 0 && next[j-1])
			case '?':
				next[j] = j > 0 && match[j-1]
			default:
				next[j] = j > 0 && match[j-1] && text[j-1] == t.literal
			}
		}
		match = next
	}
	return match[len(text)]
}

// Page cuts items[start:] to at most max entries and returns the token for the
// next page ("" when this is the last). Tokens are opaque to the client and
// bound to the action so one call's token cannot page another.
func Page(action string, total, max int, token string) (start, end int, next string, err error) {
	if token != "" {
		start, err = decodeToken(action, token)
		if err != nil {
			return 0, 0, "", err
		}
		if start > total {
			start = total
		}
	}
	end = total
	if max > 0 && start+max < total {
		end = start + max
		next = encodeToken(action, end)
	}
	return start, end, next, nil
}

func encodeToken(action string, offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(action + ":" + strconv.Itoa(offset)))
}

func decodeToken(action, token string) (int, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil {
		if a, off, ok := strings.Cut(string(raw), ":"); ok && a == action {
			if n, convErr := strconv.Atoi(off); convErr == nil && n >= 0 {
				return n, nil
			}
		}
	}
	return 0, Errorf(http.StatusBadRequest, "InvalidPaginationToken", "The pagination token %q is invalid for %s", token, action)
}

// MaxResults reads MaxResults and checks it against the action's bounds.
// def applies when the caller did not set it (0 = no limit).
func (p Params) MaxResults(min, max, def int) (int, error) {
	n, ok, err := p.Int("MaxResults")
	if err != nil {
		return 0, err
	}
	if !ok {
		return def, nil
	}
	if n < min || n > max {
		return 0, InvalidParameterValue("Value (%d) for parameter maxResults is invalid. Expecting a value between %d and %d.", n, min, max)
	}
	return n, nil
}

// WriteResponse writes body as the <ActionResponse> document. body is a
// struct whose fields carry the EC2 element names (`xml:"reservationSet>item"`)
// and whose first field is `RequestID string xml:"requestId"`.
func WriteResponse(w http.ResponseWriter, action string, body any) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	start := xml.StartElement{Name: xml.Name{Local: action + "Response"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: Namespace}}}
	if err := enc.EncodeElement(body, start); err != nil {
		WriteError(w, "", Errorf(http.StatusInternalServerError, "InternalError", "encoding %s response: %v", action, err))
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

type errorResponse struct {
	XMLName   xml.Name      `xml:"Response"`
	Errors    []errorDetail `xml:"Errors>Error"`
	RequestID string        `xml:"RequestID"`
}

type errorDetail struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// WriteError writes err in EC2's error document with its HTTP status.
func WriteError(w http.ResponseWriter, requestID string, err *Error) {
	body, _ := xml.Marshal(errorResponse{Errors: []errorDetail{{Code: err.Code, Message: err.Message}}, RequestID: requestID})
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(err.Status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}

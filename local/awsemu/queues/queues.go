// Package queues owns the emulated Amazon SQS: standard queues held in
// memory, with visibility timeouts, delays, retention and long polling, served
// over the AWS JSON 1.0 protocol that current aws-sdk-go-v2/service/sqs speaks
// (POST, `X-Amz-Target: AmazonSQS.<Action>`, JSON bodies, errors as
// `{"__type","message"}` plus the `x-amzn-query-error` header).
//
// Time comes from an injected clock so visibility and long polls are testable
// with a fake clock; waiting receivers are woken by a broadcast on every
// change, never by polling. It must not know about EC2: the emulator hands it
// event bodies through Send.
package queues

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/utils/clock"
)

// Options configures the SQS service.
type Options struct {
	// Clock drives visibility timeouts, delays, retention and long polls.
	Clock clock.Clock
	// AccountID appears in queue URLs and ARNs.
	AccountID string
	// Region appears in queue ARNs.
	Region string
}

// Service is the in-memory SQS.
type Service struct {
	clock   clock.Clock
	account string
	region  string

	mu     sync.Mutex
	queues map[string]*queue
	// changed is closed (and replaced) whenever a message may have become
	// receivable, waking every long poll.
	changed chan struct{}
	// closed ends every long poll (Close).
	closed    chan struct{}
	closeOnce sync.Once
}

// New returns an empty SQS.
func New(opts Options) *Service {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.AccountID == "" {
		opts.AccountID = "123456789012"
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	return &Service{
		clock:   opts.Clock,
		account: opts.AccountID,
		region:  opts.Region,
		queues:  map[string]*queue{},
		changed: make(chan struct{}),
		closed:  make(chan struct{}),
	}
}

// Close ends the long polls in progress (they answer with no messages) so a
// server shutting down does not wait for them. The queues stay readable.
func (s *Service) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
}

type queue struct {
	name       string
	createdAt  time.Time
	modifiedAt time.Time
	attributes map[string]string // as set by the caller, validated
	messages   []*message        // in send order
	nextSeq    uint64
}

type message struct {
	id             string
	body           string
	md5OfBody      string
	attributes     map[string]MessageAttributeValue
	md5OfAttrs     string
	sentAt         time.Time
	visibleAt      time.Time
	receiveCount   int
	firstReceiveAt time.Time
	receipt        string // the latest receipt handle; older ones are stale
}

// MessageAttributeValue is a user message attribute (SQS JSON shape).
type MessageAttributeValue struct {
	DataType    string `json:"DataType"`
	StringValue string `json:"StringValue,omitempty"`
	BinaryValue []byte `json:"BinaryValue,omitempty"`
}

// Queue attribute names the service accepts, with their defaults and bounds.
// Real SQS has more (KMS, FIFO, redrive); the ones here are those Millwright
// and its infrastructure set.
var queueAttributeBounds = map[string]struct {
	def      string
	min, max int // 0,0 = not numeric
}{
	"VisibilityTimeout":             {"30", 0, 43200},
	"MessageRetentionPeriod":        {"345600", 60, 1209600},
	"ReceiveMessageWaitTimeSeconds": {"0", 0, 20},
	"DelaySeconds":                  {"0", 0, 900},
	"MaximumMessageSize":            {"262144", 1024, 262144},
	"Policy":                        {"", 0, 0},
	"RedrivePolicy":                 {"", 0, 0},
	"SqsManagedSseEnabled":          {"true", 0, 0},
	"KmsMasterKeyId":                {"", 0, 0},
}

func (q *queue) seconds(name string) time.Duration {
	v, ok := q.attributes[name]
	if !ok {
		v = queueAttributeBounds[name].def
	}
	n, _ := strconv.Atoi(v)
	return time.Duration(n) * time.Second
}

// broadcastLocked wakes all long polls. s.mu must be held.
func (s *Service) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Error is an SQS API error as the JSON protocol carries it.
type Error struct {
	Status int
	// Type is the smithy shape name without namespace (QueueDoesNotExist).
	Type string
	// QueryCode is the legacy query-protocol code the SDK reports as the
	// error code (AWS.SimpleQueueService.NonExistentQueue).
	QueryCode string
	Message   string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.QueryCode, e.Message) }

// IsQueueDoesNotExist reports whether err is the unknown-queue error.
func IsQueueDoesNotExist(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Type == "QueueDoesNotExist"
}

func errQueueDoesNotExist(name string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "QueueDoesNotExist", QueryCode: "AWS.SimpleQueueService.NonExistentQueue",
		Message: fmt.Sprintf("The specified queue %q does not exist.", name)}
}

func errInvalidParameter(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "InvalidParameterValueException", QueryCode: "InvalidParameterValue", Message: fmt.Sprintf(format, args...)}
}

func errMissingParameter(name string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "MissingParameter", QueryCode: "MissingParameter",
		Message: fmt.Sprintf("The request must contain the parameter %s.", name)}
}

func errReceiptHandleInvalid(handle string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "ReceiptHandleIsInvalid", QueryCode: "ReceiptHandleIsInvalid",
		Message: fmt.Sprintf("The input receipt handle %q is not a valid receipt handle.", handle)}
}

// CreateQueue creates name or, if it exists with the same attributes, returns
// it; other attributes are a QueueNameExists error, as in SQS.
func (s *Service) CreateQueue(name string, attributes map[string]string) error {
	if err := validateQueueName(name); err != nil {
		return err
	}
	clean := map[string]string{}
	for k, v := range attributes {
		bounds, ok := queueAttributeBounds[k]
		if !ok {
			return &Error{Status: http.StatusBadRequest, Type: "InvalidAttributeName", QueryCode: "InvalidAttributeName",
				Message: fmt.Sprintf("Unknown Attribute %s.", k)}
		}
		if bounds.max > 0 {
			n, err := strconv.Atoi(v)
			if err != nil || n < bounds.min || n > bounds.max {
				return &Error{Status: http.StatusBadRequest, Type: "InvalidAttributeValue", QueryCode: "InvalidAttributeValue",
					Message: fmt.Sprintf("Invalid value for the parameter %s: %q is not between %d and %d.", k, v, bounds.min, bounds.max)}
			}
		}
		clean[k] = v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.queues[name]; ok {
		for k, v := range clean {
			if q.effectiveAttribute(k) != v {
				return &Error{Status: http.StatusBadRequest, Type: "QueueNameExists", QueryCode: "QueueAlreadyExists",
					Message: fmt.Sprintf("A queue already exists with the same name %q and a different value for attribute %s", name, k)}
			}
		}
		return nil
	}
	now := s.clock.Now()
	s.queues[name] = &queue{name: name, createdAt: now, modifiedAt: now, attributes: clean}
	return nil
}

func (q *queue) effectiveAttribute(name string) string {
	if v, ok := q.attributes[name]; ok {
		return v
	}
	return queueAttributeBounds[name].def
}

func validateQueueName(name string) error {
	if name == "" {
		return errMissingParameter("QueueName")
	}
	if len(name) > 80 {
		return errInvalidParameter("Value %q for parameter QueueName is invalid. Reason: longer than 80 characters.", name)
	}
	for _, r := range name {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return errInvalidParameter("Value %q for parameter QueueName is invalid. Reason: only alphanumeric characters, hyphens and underscores are allowed.", name)
		}
	}
	return nil
}

// HasQueue reports whether name exists.
func (s *Service) HasQueue(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.queues[name]
	return ok
}

// QueueURL is the URL SQS would give name when reached at baseURL.
func (s *Service) QueueURL(baseURL, name string) string {
	return strings.TrimSuffix(baseURL, "/") + "/" + s.account + "/" + name
}

// queueNameFromURL takes the last path segment of a queue URL, so URLs built
// for any host name the same queue.
func queueNameFromURL(queueURL string) (string, error) {
	if queueURL == "" {
		return "", errMissingParameter("QueueUrl")
	}
	trimmed := strings.TrimSuffix(queueURL, "/")
	i := strings.LastIndex(trimmed, "/")
	if i < 0 || i == len(trimmed)-1 {
		return "", &Error{Status: http.StatusBadRequest, Type: "InvalidAddress", QueryCode: "InvalidAddress",
			Message: fmt.Sprintf("The address %q is not valid for this endpoint.", queueURL)}
	}
	return trimmed[i+1:], nil
}

// SendInput is one message to enqueue.
type SendInput struct {
	Body         string
	DelaySeconds *int
	Attributes   map[string]MessageAttributeValue
}

// SendResult is what SendMessage answers.
type SendResult struct {
	MessageID              string
	MD5OfMessageBody       string
	MD5OfMessageAttributes string
}

// Send enqueues a message on the named queue.
func (s *Service) Send(queueName string, in SendInput) (SendResult, error) {
	if in.Body == "" {
		return SendResult{}, errMissingParameter("MessageBody")
	}
	if in.DelaySeconds != nil && (*in.DelaySeconds < 0 || *in.DelaySeconds > 900) {
		return SendResult{}, errInvalidParameter("Value %d for parameter DelaySeconds is invalid. Reason: must be between 0 and 900.", *in.DelaySeconds)
	}
	for name, attr := range in.Attributes {
		if attr.DataType == "" {
			return SendResult{}, errInvalidParameter("The message attribute %q must contain a non-empty attribute type.", name)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queues[queueName]
	if !ok {
		return SendResult{}, errQueueDoesNotExist(queueName)
	}
	if max := q.effectiveAttribute("MaximumMessageSize"); len(in.Body) > atoi(max) {
		return SendResult{}, errInvalidParameter("One or more parameters are invalid. Reason: Message must be shorter than %s bytes.", max)
	}
	now := s.clock.Now()
	delay := q.seconds("DelaySeconds")
	if in.DelaySeconds != nil {
		delay = time.Duration(*in.DelaySeconds) * time.Second
	}
	m := &message{
		id:         uuid.NewString(),
		body:       in.Body,
		md5OfBody:  md5Hex([]byte(in.Body)),
		attributes: in.Attributes,
		md5OfAttrs: MD5OfMessageAttributes(in.Attributes),
		sentAt:     now,
		visibleAt:  now.Add(delay),
	}
	q.messages = append(q.messages, m)
	q.nextSeq++
	s.broadcastLocked()
	return SendResult{MessageID: m.id, MD5OfMessageBody: m.md5OfBody, MD5OfMessageAttributes: m.md5OfAttrs}, nil
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// MD5OfMessageAttributes computes SQS's digest of message attributes: for each
// attribute in name order, the length-prefixed name, data type, a transport
// byte (1 string/number, 2 binary) and the length-prefixed value.
func MD5OfMessageAttributes(attrs map[string]MessageAttributeValue) string {
	if len(attrs) == 0 {
		return ""
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	h := md5.New()
	writeLenPrefixed := func(b []byte) {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(b)))
		h.Write(l[:])
		h.Write(b)
	}
	for _, n := range names {
		a := attrs[n]
		writeLenPrefixed([]byte(n))
		writeLenPrefixed([]byte(a.DataType))
		if strings.HasPrefix(a.DataType, "Binary") {
			h.Write([]byte{2})
			writeLenPrefixed(a.BinaryValue)
		} else {
			h.Write([]byte{1})
			writeLenPrefixed([]byte(a.StringValue))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ReceiveInput is one ReceiveMessage call.
type ReceiveInput struct {
	MaxNumberOfMessages int            // 1..10; 0 means 1
	VisibilityTimeout   *time.Duration // nil = queue default
	WaitTime            *time.Duration // nil = queue default (long poll up to 20s)
}

// ReceivedMessage is a message handed to a consumer.
type ReceivedMessage struct {
	MessageID              string
	ReceiptHandle          string
	Body                   string
	MD5OfBody              string
	MD5OfMessageAttributes string
	MessageAttributes      map[string]MessageAttributeValue
	SentAt                 time.Time
	ReceiveCount           int
	FirstReceiveAt         time.Time
}

// Receive takes up to MaxNumberOfMessages visible messages, making them
// invisible for the visibility timeout. With a wait time it blocks (long poll)
// until a message is available, the wait ends, or done is closed.
func (s *Service) Receive(done <-chan struct{}, queueName string, in ReceiveInput) ([]ReceivedMessage, error) {
	max := in.MaxNumberOfMessages
	if max == 0 {
		max = 1
	}
	if max < 1 || max > 10 {
		return nil, errInvalidParameter("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", max)
	}
	if in.VisibilityTimeout != nil && (*in.VisibilityTimeout < 0 || *in.VisibilityTimeout > 12*time.Hour) {
		return nil, errInvalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200, if provided.", int(in.VisibilityTimeout.Seconds()))
	}
	if in.WaitTime != nil && (*in.WaitTime < 0 || *in.WaitTime > 20*time.Second) {
		return nil, errInvalidParameter("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", int(in.WaitTime.Seconds()))
	}

	var deadline time.Time
	for {
		s.mu.Lock()
		q, ok := s.queues[queueName]
		if !ok {
			s.mu.Unlock()
			return nil, errQueueDoesNotExist(queueName)
		}
		now := s.clock.Now()
		if deadline.IsZero() {
			wait := q.seconds("ReceiveMessageWaitTimeSeconds")
			if in.WaitTime != nil {
				wait = *in.WaitTime
			}
			deadline = now.Add(wait)
		}
		got := s.takeVisibleLocked(q, now, max, in.VisibilityTimeout)
		if len(got) > 0 || !now.Before(deadline) {
			s.mu.Unlock()
			return got, nil
		}
		wake := deadline
		if next, ok := q.nextVisibleAfter(now); ok && next.Before(wake) {
			wake = next
		}
		changed := s.changed
		s.mu.Unlock()

		// Measure from the clock again: it may have moved since the lock was
		// released, and a fake timer with a non-positive duration never fires.
		d := wake.Sub(s.clock.Now())
		if d <= 0 {
			continue
		}
		timer := s.clock.NewTimer(d)
		select {
		case <-changed:
		case <-timer.C():
		case <-done:
			timer.Stop()
			return nil, nil
		case <-s.closed:
			timer.Stop()
			return nil, nil
		}
		timer.Stop()
	}
}

func (s *Service) takeVisibleLocked(q *queue, now time.Time, max int, visibility *time.Duration) []ReceivedMessage {
	retention := q.seconds("MessageRetentionPeriod")
	vt := q.seconds("VisibilityTimeout")
	if visibility != nil {
		vt = *visibility
	}
	kept := q.messages[:0]
	for _, m := range q.messages {
		if now.Sub(m.sentAt) < retention {
			kept = append(kept, m)
		}
	}
	q.messages = kept

	var out []ReceivedMessage
	for _, m := range q.messages {
		if len(out) == max {
			break
		}
		if m.visibleAt.After(now) {
			continue
		}
		m.receiveCount++
		if m.firstReceiveAt.IsZero() {
			m.firstReceiveAt = now
		}
		m.visibleAt = now.Add(vt)
		m.receipt = newReceiptHandle(q.name, m.id, m.receiveCount)
		out = append(out, ReceivedMessage{
			MessageID: m.id, ReceiptHandle: m.receipt, Body: m.body, MD5OfBody: m.md5OfBody,
			MD5OfMessageAttributes: m.md5OfAttrs, MessageAttributes: m.attributes,
			SentAt: m.sentAt, ReceiveCount: m.receiveCount, FirstReceiveAt: m.firstReceiveAt,
		})
	}
	return out
}

func (q *queue) nextVisibleAfter(now time.Time) (time.Time, bool) {
	var next time.Time
	for _, m := range q.messages {
		if m.visibleAt.After(now) && (next.IsZero() || m.visibleAt.Before(next)) {
			next = m.visibleAt
		}
	}
	return next, !next.IsZero()
}

// A receipt handle names the queue, the message and which receive it came
// from, plus randomness so handles are unguessable like SQS's.
func newReceiptHandle(queueName, messageID string, receive int) string {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	raw := queueName + "\x00" + messageID + "\x00" + strconv.Itoa(receive) + "\x00" + hex.EncodeToString(nonce[:])
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func parseReceiptHandle(handle string) (queueName, messageID string, err error) {
	raw, decErr := base64.RawURLEncoding.DecodeString(handle)
	parts := strings.Split(string(raw), "\x00")
	if handle == "" || decErr != nil || len(parts) != 4 {
		return "", "", errReceiptHandleInvalid(handle)
	}
	return parts[0], parts[1], nil
}

// Delete removes the message the receipt handle came from. A handle for a
// message already deleted succeeds, as in SQS; a stale handle (the message was
// received again since) leaves the message in place.
func (s *Service) Delete(queueName, receiptHandle string) error {
	handleQueue, id, err := parseReceiptHandle(receiptHandle)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queues[queueName]
	if !ok {
		return errQueueDoesNotExist(queueName)
	}
	if handleQueue != queueName {
		return errReceiptHandleInvalid(receiptHandle)
	}
	for i, m := range q.messages {
		if m.id == id {
			if m.receipt == receiptHandle {
				q.messages = append(q.messages[:i], q.messages[i+1:]...)
			}
			return nil
		}
	}
	return nil
}

// ChangeVisibility sets how long from now an in-flight message stays hidden;
// zero makes it receivable at once.
func (s *Service) ChangeVisibility(queueName, receiptHandle string, timeout time.Duration) error {
	if timeout < 0 || timeout > 12*time.Hour {
		return errInvalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200.", int(timeout.Seconds()))
	}
	handleQueue, id, err := parseReceiptHandle(receiptHandle)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queues[queueName]
	if !ok {
		return errQueueDoesNotExist(queueName)
	}
	if handleQueue != queueName {
		return errReceiptHandleInvalid(receiptHandle)
	}
	now := s.clock.Now()
	for _, m := range q.messages {
		if m.id != id {
			continue
		}
		if m.receipt != receiptHandle {
			break
		}
		if !m.visibleAt.After(now) {
			return &Error{Status: http.StatusBadRequest, Type: "MessageNotInflight", QueryCode: "AWS.SimpleQueueService.MessageNotInflight",
				Message: fmt.Sprintf("Message %s is not in flight: it is already visible.", id)}
		}
		m.visibleAt = now.Add(timeout)
		s.broadcastLocked()
		return nil
	}
	return errInvalidParameter("Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", receiptHandle)
}

// QueueState summarises one queue for state dumps and tests.
type QueueState struct {
	Name string `json:"name"`
	// Visible messages can be received now; InFlight were received and are
	// hidden; Delayed were sent with a delay that has not passed.
	Visible  int            `json:"visible"`
	InFlight int            `json:"inFlight"`
	Delayed  int            `json:"delayed"`
	Messages []MessageState `json:"messages,omitempty"`
}

// MessageState is one message in a state dump.
type MessageState struct {
	ID           string    `json:"id"`
	Body         string    `json:"body"`
	SentAt       time.Time `json:"sentAt"`
	VisibleAt    time.Time `json:"visibleAt"`
	ReceiveCount int       `json:"receiveCount"`
}

// Snapshot returns every queue with its messages, by name.
func (s *Service) Snapshot() []QueueState {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	out := make([]QueueState, 0, len(s.queues))
	for _, q := range s.queues {
		qs := QueueState{Name: q.name}
		for _, m := range q.messages {
			switch {
			case !m.visibleAt.After(now):
				qs.Visible++
			case m.receiveCount > 0:
				qs.InFlight++
			default:
				qs.Delayed++
			}
			qs.Messages = append(qs.Messages, MessageState{ID: m.id, Body: m.body, SentAt: m.sentAt, VisibleAt: m.visibleAt, ReceiveCount: m.receiveCount})
		}
		out = append(out, qs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// attributes returns GetQueueAttributes' answer for q. s.mu must be held.
func (s *Service) attributesLocked(q *queue) map[string]string {
	out := map[string]string{}
	for name, b := range queueAttributeBounds {
		if v := q.effectiveAttribute(name); v != "" || b.def != "" {
			out[name] = v
		}
	}
	now := s.clock.Now()
	var visible, inflight, delayed int
	for _, m := range q.messages {
		switch {
		case !m.visibleAt.After(now):
			visible++
		case m.receiveCount > 0:
			inflight++
		default:
			delayed++
		}
	}
	out["ApproximateNumberOfMessages"] = strconv.Itoa(visible)
	out["ApproximateNumberOfMessagesNotVisible"] = strconv.Itoa(inflight)
	out["ApproximateNumberOfMessagesDelayed"] = strconv.Itoa(delayed)
	out["CreatedTimestamp"] = strconv.FormatInt(q.createdAt.Unix(), 10)
	out["LastModifiedTimestamp"] = strconv.FormatInt(q.modifiedAt.Unix(), 10)
	out["QueueArn"] = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", s.region, s.account, q.name)
	return out
}

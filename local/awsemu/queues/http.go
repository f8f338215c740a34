package queues

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// TargetPrefix is the X-Amz-Target prefix of every SQS JSON call.
const TargetPrefix = "AmazonSQS."

// IsSQSRequest reports whether r is an SQS JSON-protocol call.
func IsSQSRequest(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("X-Amz-Target"), TargetPrefix)
}

// ServeHTTP answers one SQS JSON call.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestID := uuid.NewString()
	w.Header().Set("x-amzn-RequestId", requestID)
	action := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), TargetPrefix)
	if r.Method != http.MethodPost {
		writeError(w, &Error{Status: http.StatusMethodNotAllowed, Type: "UnsupportedOperation", QueryCode: "AWS.SimpleQueueService.UnsupportedOperation",
			Message: "SQS JSON calls must be POST"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	if err != nil {
		writeError(w, errInvalidParameter("cannot read the request body: %v", err))
		return
	}
	if len(body) == 0 {
		body = []byte("{}")
	}
	base := "http://" + r.Host
	if r.TLS != nil {
		base = "https://" + r.Host
	}

	var out any
	switch action {
	case "CreateQueue":
		out, err = s.handleCreateQueue(base, body)
	case "GetQueueUrl":
		out, err = s.handleGetQueueURL(base, body)
	case "GetQueueAttributes":
		out, err = s.handleGetQueueAttributes(body)
	case "SendMessage":
		out, err = s.handleSendMessage(body)
	case "ReceiveMessage":
		out, err = s.handleReceiveMessage(r, body)
	case "DeleteMessage":
		out, err = s.handleDeleteMessage(body)
	case "ChangeMessageVisibility":
		out, err = s.handleChangeMessageVisibility(body)
	default:
		err = &Error{Status: http.StatusBadRequest, Type: "UnsupportedOperation", QueryCode: "AWS.SimpleQueueService.UnsupportedOperation",
			Message: fmt.Sprintf("The emulator does not implement SQS action %q", action)}
	}
	if err != nil {
		var apiErr *Error
		if !errors.As(err, &apiErr) {
			apiErr = &Error{Status: http.StatusInternalServerError, Type: "InternalFailure", QueryCode: "InternalFailure", Message: err.Error()}
		}
		writeError(w, apiErr)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(out)
}

func writeError(w http.ResponseWriter, e *Error) {
	fault := "Sender"
	if e.Status >= 500 {
		fault = "Receiver"
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-query-error", e.QueryCode+";"+fault)
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + e.Type, "message": e.Message})
}

func decode(body []byte, into any) error {
	if err := json.Unmarshal(body, into); err != nil {
		return &Error{Status: http.StatusBadRequest, Type: "SerializationException", QueryCode: "SerializationException",
			Message: fmt.Sprintf("cannot decode the JSON request: %v", err)}
	}
	return nil
}

func (s *Service) handleCreateQueue(base string, body []byte) (any, error) {
	var in struct {
		QueueName  string            `json:"QueueName"`
		Attributes map[string]string `json:"Attributes"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := s.CreateQueue(in.QueueName, in.Attributes); err != nil {
		return nil, err
	}
	return map[string]string{"QueueUrl": s.QueueURL(base, in.QueueName)}, nil
}

func (s *Service) handleGetQueueURL(base string, body []byte) (any, error) {
	var in struct {
		QueueName string `json:"QueueName"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.QueueName == "" {
		return nil, errMissingParameter("QueueName")
	}
	if !s.HasQueue(in.QueueName) {
		return nil, errQueueDoesNotExist(in.QueueName)
	}
	return map[string]string{"QueueUrl": s.QueueURL(base, in.QueueName)}, nil
}

func (s *Service) handleGetQueueAttributes(body []byte) (any, error) {
	var in struct {
		QueueURL       string   `json:"QueueUrl"`
		AttributeNames []string `json:"AttributeNames"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	name, err := queueNameFromURL(in.QueueURL)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queues[name]
	if !ok {
		return nil, errQueueDoesNotExist(name)
	}
	all := s.attributesLocked(q)
	out := map[string]string{}
	for _, n := range in.AttributeNames {
		if n == "All" {
			out = all
			break
		}
		if v, ok := all[n]; ok {
			out[n] = v
		}
	}
	return map[string]any{"Attributes": out}, nil
}

func (s *Service) handleSendMessage(body []byte) (any, error) {
	var in struct {
		QueueURL          string                           `json:"QueueUrl"`
		MessageBody       string                           `json:"MessageBody"`
		DelaySeconds      *int                             `json:"DelaySeconds"`
		MessageAttributes map[string]MessageAttributeValue `json:"MessageAttributes"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	name, err := queueNameFromURL(in.QueueURL)
	if err != nil {
		return nil, err
	}
	res, err := s.Send(name, SendInput{Body: in.MessageBody, DelaySeconds: in.DelaySeconds, Attributes: in.MessageAttributes})
	if err != nil {
		return nil, err
	}
	out := map[string]string{"MessageId": res.MessageID, "MD5OfMessageBody": res.MD5OfMessageBody}
	if res.MD5OfMessageAttributes != "" {
		out["MD5OfMessageAttributes"] = res.MD5OfMessageAttributes
	}
	return out, nil
}

type receivedMessageJSON struct {
	MessageID              string                           `json:"MessageId"`
	ReceiptHandle          string                           `json:"ReceiptHandle"`
	MD5OfBody              string                           `json:"MD5OfBody"`
	Body                   string                           `json:"Body"`
	Attributes             map[string]string                `json:"Attributes,omitempty"`
	MD5OfMessageAttributes string                           `json:"MD5OfMessageAttributes,omitempty"`
	MessageAttributes      map[string]MessageAttributeValue `json:"MessageAttributes,omitempty"`
}

func (s *Service) handleReceiveMessage(r *http.Request, body []byte) (any, error) {
	var in struct {
		QueueURL                    string   `json:"QueueUrl"`
		AttributeNames              []string `json:"AttributeNames"`
		MessageSystemAttributeNames []string `json:"MessageSystemAttributeNames"`
		MessageAttributeNames       []string `json:"MessageAttributeNames"`
		MaxNumberOfMessages         *int     `json:"MaxNumberOfMessages"`
		VisibilityTimeout           *int     `json:"VisibilityTimeout"`
		WaitTimeSeconds             *int     `json:"WaitTimeSeconds"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	name, err := queueNameFromURL(in.QueueURL)
	if err != nil {
		return nil, err
	}
	var rin ReceiveInput
	if in.MaxNumberOfMessages != nil {
		// An explicit 0 is out of range, unlike an absent value (which is 1).
		if n := *in.MaxNumberOfMessages; n < 1 || n > 10 {
			return nil, errInvalidParameter("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", n)
		}
		rin.MaxNumberOfMessages = *in.MaxNumberOfMessages
	}
	if in.VisibilityTimeout != nil {
		d := time.Duration(*in.VisibilityTimeout) * time.Second
		rin.VisibilityTimeout = &d
	}
	if in.WaitTimeSeconds != nil {
		d := time.Duration(*in.WaitTimeSeconds) * time.Second
		rin.WaitTime = &d
	}
	msgs, err := s.Receive(r.Context().Done(), name, rin)
	if err != nil {
		return nil, err
	}
	systemNames := append(append([]string{}, in.AttributeNames...), in.MessageSystemAttributeNames...)
	out := make([]receivedMessageJSON, 0, len(msgs))
	for _, m := range msgs {
		j := receivedMessageJSON{MessageID: m.MessageID, ReceiptHandle: m.ReceiptHandle, MD5OfBody: m.MD5OfBody, Body: m.Body}
		j.Attributes = systemAttributes(m, systemNames)
		if attrs := selectMessageAttributes(m.MessageAttributes, in.MessageAttributeNames); len(attrs) > 0 {
			j.MessageAttributes = attrs
			j.MD5OfMessageAttributes = MD5OfMessageAttributes(attrs)
		}
		out = append(out, j)
	}
	if len(out) == 0 {
		return map[string]any{}, nil
	}
	return map[string]any{"Messages": out}, nil
}

func systemAttributes(m ReceivedMessage, names []string) map[string]string {
	all := map[string]string{
		"SentTimestamp":                    strconv.FormatInt(m.SentAt.UnixMilli(), 10),
		"ApproximateReceiveCount":          strconv.Itoa(m.ReceiveCount),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.FirstReceiveAt.UnixMilli(), 10),
		"SenderId":                         "AIDAEMULATOR",
	}
	out := map[string]string{}
	for _, n := range names {
		if n == "All" {
			return all
		}
		if v, ok := all[n]; ok {
			out[n] = v
		}
	}
	return out
}

// selectMessageAttributes applies MessageAttributeNames: exact names, "All",
// ".*", or "prefix.*".
func selectMessageAttributes(attrs map[string]MessageAttributeValue, names []string) map[string]MessageAttributeValue {
	out := map[string]MessageAttributeValue{}
	for attrName, v := range attrs {
		for _, n := range names {
			if n == "All" || n == ".*" || n == attrName ||
				(strings.HasSuffix(n, ".*") && strings.HasPrefix(attrName, strings.TrimSuffix(n, "*"))) {
				out[attrName] = v
				break
			}
		}
	}
	return out
}

func (s *Service) handleDeleteMessage(body []byte) (any, error) {
	var in struct {
		QueueURL      string `json:"QueueUrl"`
		ReceiptHandle string `json:"ReceiptHandle"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	name, err := queueNameFromURL(in.QueueURL)
	if err != nil {
		return nil, err
	}
	if err := s.Delete(name, in.ReceiptHandle); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}

func (s *Service) handleChangeMessageVisibility(body []byte) (any, error) {
	var in struct {
		QueueURL          string `json:"QueueUrl"`
		ReceiptHandle     string `json:"ReceiptHandle"`
		VisibilityTimeout *int   `json:"VisibilityTimeout"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	name, err := queueNameFromURL(in.QueueURL)
	if err != nil {
		return nil, err
	}
	if in.VisibilityTimeout == nil {
		return nil, errMissingParameter("VisibilityTimeout")
	}
	if err := s.ChangeVisibility(name, in.ReceiptHandle, time.Duration(*in.VisibilityTimeout)*time.Second); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}

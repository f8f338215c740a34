package awsemu

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// SSM Parameter Store over the JSON 1.1 protocol (X-Amz-Target:
// AmazonSSM.GetParameter / GetParameters), read-only: the public
// parameters AWS publishes for its AMIs (see images.go), which is what
// AMI selector terms read.

// ssmTargetPrefix is the X-Amz-Target prefix of every SSM call.
const ssmTargetPrefix = "AmazonSSM."

func isSSMRequest(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("X-Amz-Target"), ssmTargetPrefix)
}

type ssmParameter struct {
	Name             string  `json:"Name"`
	Type             string  `json:"Type"`
	Value            string  `json:"Value"`
	Version          int64   `json:"Version"`
	LastModifiedDate float64 `json:"LastModifiedDate"`
	ARN              string  `json:"ARN"`
	DataType         string  `json:"DataType"`
}

type ssmError struct {
	status  int
	code    string
	message string
}

func (e *Emulator) serveSSM(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-amzn-RequestId", newRequestID())
	action := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), ssmTargetPrefix)
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeSSMError(w, &ssmError{http.StatusBadRequest, "ValidationException", "cannot read the request body"})
		return
	}
	var out any
	var apiErr *ssmError
	switch action {
	case "GetParameter":
		var in struct{ Name string }
		if err := json.Unmarshal(body, &in); err != nil || in.Name == "" {
			apiErr = &ssmError{http.StatusBadRequest, "ValidationException", "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null"}
			break
		}
		p, ok := e.ssmParameter(in.Name)
		if !ok {
			apiErr = &ssmError{http.StatusBadRequest, "ParameterNotFound", fmt.Sprintf("Parameter %s not found.", in.Name)}
			break
		}
		out = map[string]any{"Parameter": p}
	case "GetParameters":
		var in struct{ Names []string }
		if err := json.Unmarshal(body, &in); err != nil || len(in.Names) == 0 || len(in.Names) > 10 {
			apiErr = &ssmError{http.StatusBadRequest, "ValidationException", "1 validation error detected: Value at 'names' failed to satisfy constraint: Member must have length between 1 and 10"}
			break
		}
		found, invalid := []ssmParameter{}, []string{}
		for _, name := range in.Names {
			if p, ok := e.ssmParameter(name); ok {
				found = append(found, p)
			} else {
				invalid = append(invalid, name)
			}
		}
		out = map[string]any{"Parameters": found, "InvalidParameters": invalid}
	default:
		apiErr = &ssmError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("The emulator implements SSM GetParameter and GetParameters, not %q", action)}
	}
	if apiErr != nil {
		writeSSMError(w, apiErr)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(out)
}

// ssmParameter looks a parameter up by name or ARN
// (arn:aws:ssm:<region>::parameter/aws/service/...).
func (e *Emulator) ssmParameter(name string) (ssmParameter, bool) {
	if _, rest, ok := strings.Cut(name, ":parameter"); ok && strings.HasPrefix(name, "arn:") {
		name = rest
	}
	im, ok := e.world.imageBySSMParameter(name)
	if !ok {
		return ssmParameter{}, false
	}
	return ssmParameter{
		Name: name, Type: "String", Value: im.id, Version: 1,
		LastModifiedDate: float64(im.created.Unix()),
		ARN:              fmt.Sprintf("arn:aws:ssm:%s::parameter%s", e.opts.Region, name),
		DataType:         "aws:ec2:image",
	}, true
}

func writeSSMError(w http.ResponseWriter, e *ssmError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": e.code, "message": e.message})
}

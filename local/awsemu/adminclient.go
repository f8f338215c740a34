package awsemu

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// AdminClient calls a running emulator's admin API (what `starter sim` uses).
type AdminClient struct {
	base string
	http *http.Client
}

// NewAdminClient talks to the emulator at baseURL (its URL(), e.g.
// http://127.0.0.1:4570). httpClient nil means a client with a 30s timeout.
func NewAdminClient(baseURL string, httpClient *http.Client) *AdminClient {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
	}
	return &AdminClient{base: strings.TrimSuffix(baseURL, "/"), http: httpClient}
}

func (c *AdminClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+AdminPathPrefix+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("awsemu admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("awsemu admin %s %s: reading response: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		apiErr := &AdminError{Status: resp.StatusCode}
		if json.Unmarshal(raw, apiErr) != nil || apiErr.Message == "" {
			apiErr.Message = fmt.Sprintf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(raw)))
		}
		return apiErr
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("awsemu admin %s %s: decoding response: %w", method, path, err)
		}
	}
	return nil
}

// State dumps the emulated account.
func (c *AdminClient) State(ctx context.Context) (*State, error) {
	var s State
	return &s, c.do(ctx, http.MethodGet, "state", nil, &s)
}

// Faults returns the injected faults.
func (c *AdminClient) Faults(ctx context.Context) (*Faults, error) {
	var f Faults
	return &f, c.do(ctx, http.MethodGet, "faults", nil, &f)
}

// SetThrottle installs a throttling fault.
func (c *AdminClient) SetThrottle(ctx context.Context, t ThrottleFault) error {
	return c.do(ctx, http.MethodPut, "faults/throttle", t, nil)
}

// ClearThrottle removes the throttling fault.
func (c *AdminClient) ClearThrottle(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "faults/throttle", nil, nil)
}

// AddCapacityFault exhausts matching pools.
func (c *AdminClient) AddCapacityFault(ctx context.Context, f CapacityFault) error {
	return c.do(ctx, http.MethodPost, "faults/capacity", f, nil)
}

// RemoveCapacityFault removes one capacity fault.
func (c *AdminClient) RemoveCapacityFault(ctx context.Context, f CapacityFault) error {
	return c.do(ctx, http.MethodDelete, "faults/capacity", f, nil)
}

// ClearCapacityFaults removes all capacity faults.
func (c *AdminClient) ClearCapacityFaults(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "faults/capacity", nil, nil)
}

// SetCallFaults replaces the call faults (errors, latency, lost and held
// responses).
func (c *AdminClient) SetCallFaults(ctx context.Context, faults []CallFault) error {
	return c.do(ctx, http.MethodPut, "faults/calls", faults, nil)
}

// ClearCallFaults removes every call fault.
func (c *AdminClient) ClearCallFaults(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "faults/calls", nil, nil)
}

// EventConfig returns where events go.
func (c *AdminClient) EventConfig(ctx context.Context) (*EventConfig, error) {
	var cfg EventConfig
	return &cfg, c.do(ctx, http.MethodGet, "events/config", nil, &cfg)
}

// ConfigureEvents sets the event queue and state-change notifications.
func (c *AdminClient) ConfigureEvents(ctx context.Context, cfg EventConfig) error {
	return c.do(ctx, http.MethodPut, "events/config", cfg, nil)
}

// InterruptSpot sends a spot interruption warning and terminates the instance
// after terminateAfter (0: the emulator's default, 2m).
func (c *AdminClient) InterruptSpot(ctx context.Context, instanceID string, terminateAfter time.Duration) (*Interruption, error) {
	var out Interruption
	err := c.do(ctx, http.MethodPost, "instances/"+url.PathEscape(instanceID)+"/spot-interruption",
		SpotInterruptionRequest{TerminateAfter: Duration(terminateAfter)}, &out)
	return &out, err
}

// RecommendRebalance sends a rebalance recommendation.
func (c *AdminClient) RecommendRebalance(ctx context.Context, instanceID string) (*Event, error) {
	var out Event
	return &out, c.do(ctx, http.MethodPost, "instances/"+url.PathEscape(instanceID)+"/rebalance-recommendation", nil, &out)
}

// ScheduleChange sends an AWS Health scheduled-change event.
func (c *AdminClient) ScheduleChange(ctx context.Context, instanceID string, sc ScheduledChange) (*Event, error) {
	var out Event
	return &out, c.do(ctx, http.MethodPost, "instances/"+url.PathEscape(instanceID)+"/scheduled-change", sc, &out)
}

// PublishImageRelease publishes a new release of an image family (a newer
// AMI for family@latest).
func (c *AdminClient) PublishImageRelease(ctx context.Context, release ImageRelease) (*ImageReleaseResult, error) {
	var out ImageReleaseResult
	return &out, c.do(ctx, http.MethodPost, "images/releases", release, &out)
}

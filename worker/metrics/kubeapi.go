package metrics

import (
	"net/http"
	"strings"

	"k8s.io/utils/clock"
)

// KubeAPITransport wraps a Kubernetes client's transport (rest.Config.Wrap)
// to record each request's duration by verb, resource and calling activity
// (millwright_kube_api_duration_seconds): the API server's share of an
// activity's time, next to the cloud's (cloudprovider_duration_seconds).
// Watches are long by design and not recorded. The client's rate limiter
// waits before the transport, so its time is not in here.
func (m *Metrics) KubeAPITransport(clk clock.PassiveClock) func(http.RoundTripper) http.RoundTripper {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") == "true" {
				return next.RoundTrip(req)
			}
			start := clk.Now()
			resp, err := next.RoundTrip(req)
			verb, resource := kubeVerbAndResource(req.Method, req.URL.Path)
			m.kubeAPIDuration.WithLabelValues(verb, resource, callerActivity(req.Context())).Observe(clk.Since(start).Seconds())
			return resp, err
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// kubeVerbAndResource names a request as the API server's audit does:
// get/list/create/update/patch/delete/deletecollection and the resource
// with its subresource (nodes, pods/eviction, nodeclaims/status).
func kubeVerbAndResource(method, path string) (string, string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return strings.ToLower(method), "other"
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return strings.ToLower(method), "other"
	}
	resource, named := rest[0], len(rest) >= 2
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}
	switch method {
	case http.MethodGet:
		if named {
			return "get", resource
		}
		return "list", resource
	case http.MethodPost:
		return "create", resource
	case http.MethodPut:
		return "update", resource
	case http.MethodPatch:
		return "patch", resource
	case http.MethodDelete:
		if named {
			return "delete", resource
		}
		return "deletecollection", resource
	}
	return strings.ToLower(method), resource
}

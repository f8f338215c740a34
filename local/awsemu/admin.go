package awsemu

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"
)

// AdminPathPrefix is where the admin API lives on the emulator's server.
//
// Endpoints (JSON in and out; errors are {"error": "..."} with a 4xx status):
//
//	GET    /_admin/state                                  State
//	GET    /_admin/faults                                 Faults
//	PUT    /_admin/faults/throttle                        ThrottleFault
//	DELETE /_admin/faults/throttle
//	POST   /_admin/faults/capacity                        CapacityFault (add)
//	DELETE /_admin/faults/capacity                        CapacityFault (remove one) or no body (remove all)
//	PUT    /_admin/faults/calls                           []CallFault (replace)
//	DELETE /_admin/faults/calls
//	GET    /_admin/events/config                          EventConfig
//	PUT    /_admin/events/config                          EventConfig
//	POST   /_admin/instances/{id}/spot-interruption       {"terminateAfter": "2m"} → Interruption
//	POST   /_admin/instances/{id}/rebalance-recommendation → Event
//	POST   /_admin/instances/{id}/scheduled-change        ScheduledChange → Event
//	POST   /_admin/images/releases                        ImageRelease → ImageReleaseResult
const AdminPathPrefix = "/_admin/"

// SpotInterruptionRequest is the body of the spot-interruption endpoint.
type SpotInterruptionRequest struct {
	// TerminateAfter defaults to the emulator's SpotInterruptionDelay (2m).
	TerminateAfter Duration `json:"terminateAfter,omitempty"`
}

func (e *Emulator) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_admin/state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, e.State())
	})
	mux.HandleFunc("GET /_admin/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, e.Faults())
	})
	mux.HandleFunc("PUT /_admin/faults/throttle", func(w http.ResponseWriter, r *http.Request) {
		var t ThrottleFault
		if !readJSON(w, r, &t, false) {
			return
		}
		if err := e.SetThrottle(t); err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, e.Faults())
	})
	mux.HandleFunc("DELETE /_admin/faults/throttle", func(w http.ResponseWriter, r *http.Request) {
		e.ClearThrottle()
		writeJSON(w, http.StatusOK, e.Faults())
	})
	mux.HandleFunc("POST /_admin/faults/capacity", func(w http.ResponseWriter, r *http.Request) {
		var c CapacityFault
		if !readJSON(w, r, &c, false) {
			return
		}
		if err := e.AddCapacityFault(c); err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, e.Faults())
	})
	mux.HandleFunc("DELETE /_admin/faults/capacity", func(w http.ResponseWriter, r *http.Request) {
		var c *CapacityFault
		if !readJSON(w, r, &c, true) {
			return
		}
		if c == nil {
			e.ClearCapacityFaults()
		} else if !e.RemoveCapacityFault(*c) {
			writeAdminError(w, adminErrorf(http.StatusNotFound, "no capacity fault %+v", *c))
			return
		}
		writeJSON(w, http.StatusOK, e.Faults())
	})
	mux.HandleFunc("PUT /_admin/faults/calls", func(w http.ResponseWriter, r *http.Request) {
		var calls []CallFault
		if !readJSON(w, r, &calls, false) {
			return
		}
		if err := e.SetCallFaults(calls); err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, e.Faults())
	})
	mux.HandleFunc("DELETE /_admin/faults/calls", func(w http.ResponseWriter, r *http.Request) {
		e.ClearCallFaults()
		writeJSON(w, http.StatusOK, e.Faults())
	})
	mux.HandleFunc("GET /_admin/events/config", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, e.EventConfig())
	})
	mux.HandleFunc("PUT /_admin/events/config", func(w http.ResponseWriter, r *http.Request) {
		var cfg EventConfig
		if !readJSON(w, r, &cfg, false) {
			return
		}
		if err := e.ConfigureEvents(cfg); err != nil {
			writeAdminError(w, adminErrorf(http.StatusBadRequest, "%v", err))
			return
		}
		writeJSON(w, http.StatusOK, e.EventConfig())
	})
	mux.HandleFunc("POST /_admin/instances/{id}/spot-interruption", func(w http.ResponseWriter, r *http.Request) {
		var req SpotInterruptionRequest
		if !readJSON(w, r, &req, true) {
			return
		}
		out, err := e.InterruptSpot(r.PathValue("id"), time.Duration(req.TerminateAfter))
		if err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /_admin/instances/{id}/rebalance-recommendation", func(w http.ResponseWriter, r *http.Request) {
		out, err := e.RecommendRebalance(r.PathValue("id"))
		if err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /_admin/instances/{id}/scheduled-change", func(w http.ResponseWriter, r *http.Request) {
		var req ScheduledChange
		if !readJSON(w, r, &req, true) {
			return
		}
		out, err := e.ScheduleChange(r.PathValue("id"), req)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /_admin/images/releases", func(w http.ResponseWriter, r *http.Request) {
		var req ImageRelease
		if !readJSON(w, r, &req, false) {
			return
		}
		out, err := e.PublishImageRelease(req)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc(AdminPathPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeAdminError(w, adminErrorf(http.StatusNotFound, "no admin endpoint %s %s", r.Method, r.URL.Path))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeAdminError(w http.ResponseWriter, err error) {
	var a *AdminError
	if !errors.As(err, &a) {
		a = adminErrorf(http.StatusInternalServerError, "%v", err)
	}
	writeJSON(w, a.Status, a)
}

// readJSON decodes the body into v; an empty body is an error unless
// optional (then v is left as is).
func readJSON(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeAdminError(w, adminErrorf(http.StatusBadRequest, "reading body: %v", err))
		return false
	}
	if len(body) == 0 {
		if optional {
			return true
		}
		writeAdminError(w, adminErrorf(http.StatusBadRequest, "%s %s needs a JSON body", r.Method, r.URL.Path))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeAdminError(w, adminErrorf(http.StatusBadRequest, "decoding %s body: %v", r.URL.Path, err))
		return false
	}
	return true
}

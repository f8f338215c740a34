package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultAddress is where the worker serves metrics and probes.
const DefaultAddress = ":8080"

// shutdownTimeout bounds how long a stopping server waits for scrapes in
// flight.
const shutdownTimeout = 5 * time.Second

// Readiness is whether the worker does its job: its informers have synced
// and its Temporal worker polls. The zero value is not ready.
type Readiness struct{ ready atomic.Bool }

// Set marks the worker ready or not.
func (r *Readiness) Set(ready bool) { r.ready.Store(ready) }

// Ready reports the last Set.
func (r *Readiness) Ready() bool { return r.ready.Load() }

// Server serves /metrics from a gatherer, /healthz (the process answers)
// and /readyz (Readiness).
type Server struct {
	listener net.Listener
	server   *http.Server
}

// Listen binds address now, so a taken port fails the worker at start
// rather than later; Serve serves on it.
func Listen(address string, gatherer prometheus.Gatherer, readiness *Readiness) (*Server, error) {
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("--metrics-address %s: %w", address, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if readiness == nil || !readiness.Ready() {
			http.Error(w, "not ready: informers syncing or the Temporal worker not started", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return &Server{
		listener: listener,
		server:   &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
	}, nil
}

// Addr is the bound address (the port chosen for ":0").
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// Serve serves until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context) error {
	served := make(chan error, 1)
	go func() { served <- s.server.Serve(s.listener) }()
	select {
	case err := <-served:
		return fmt.Errorf("metrics server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := s.server.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("metrics server shutdown: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	return nil
}

package temporal

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	"go.uber.org/multierr"
	"k8s.io/apimachinery/pkg/util/wait"
)

// uiStopTimeout bounds how long stop waits for the UI's serve loop to return.
const uiStopTimeout = 10 * time.Second

// uiServer is the Temporal web UI (its Go server with the embedded assets)
// serving in a goroutine.
type uiServer struct {
	server *uiserver.Server
	done   chan struct{}
}

// startUI serves the UI on addr (already checked free) for the frontend at
// frontendAddr and returns once it answers its health check.
//
// The UI server's Start blocks and calls log.Fatal on any listen error, which
// is why the caller checks the port first and why we wait for the health
// check here: stopping it before it has bound would leave it serving.
func startUI(ctx context.Context, addr, frontendAddr, namespace string) (*uiServer, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("temporal UI address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("temporal UI address %q: %w", addr, err)
	}

	server := uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: frontendAddr,
		EnableUI:            true,
		DefaultNamespace:    namespace,
		// The local UI is plain HTTP. Its CSRF cookie is Secure by default,
		// which browsers drop on http://, and then every write action
		// (signal, cancel, terminate, start) fails the CSRF check.
		CORS:             uiconfig.CORS{CookieInsecure: true},
		Auth:             uiconfig.Auth{Enabled: false},
		HideLogs:         true,
		DisableNewsFetch: true,
	}))
	ui := &uiServer{server: server, done: make(chan struct{})}
	go func() {
		defer close(ui.done)
		// Returns nil once stopped; any other outcome exits the process
		// inside the library.
		_ = server.Start()
	}()

	healthURL := "http://" + addr + "/healthz"
	httpClient := &http.Client{Timeout: time.Second}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, healthURL, nil)
		if err != nil {
			return false, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return nil, multierr.Append(
			fmt.Errorf("waiting for the temporal UI at %s to answer: %w", healthURL, err),
			ui.stop())
	}
	return ui, nil
}

func (ui *uiServer) stop() error {
	ui.server.Stop()
	select {
	case <-ui.done:
		return nil
	case <-time.After(uiStopTimeout):
		return fmt.Errorf("stopping temporal UI: still serving after %s", uiStopTimeout)
	}
}

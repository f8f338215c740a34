// Package connect owns how Millwright's binaries reach an external Temporal
// service: address, namespace and credentials (mTLS, or an API key for
// Temporal Cloud), bound to command-line flags with environment defaults. The
// worker and every starter subcommand that talks to Temporal use it, so they
// accept the same flags.
package connect

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

// Temporal is how a subcommand reaches an external Temporal
// service: address, namespace and credentials (mTLS and/or an API key for
// Temporal Cloud). Every subcommand that talks to Temporal binds it with
// BindFlags. Each flag defaults to an environment variable so a shell can be
// set up once:
//
//	TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS,
//	TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY, TEMPORAL_TLS_CA, TEMPORAL_TLS_SERVER_NAME
type Temporal struct {
	Address       string
	Namespace     string
	APIKey        string
	TLS           bool
	TLSCert       string
	TLSKey        string
	TLSCA         string
	TLSServerName string

	// Logger receives the SDK's logs (the worker routes them to zap); nil
	// keeps only warnings, on standard error.
	Logger sdklog.Logger
	// MetricsHandler receives the SDK's metrics (the worker's Prometheus
	// registry); nil drops them.
	MetricsHandler client.MetricsHandler
}

// Defaults when neither flag nor environment says otherwise: the local dev server.
const (
	defaultTemporalAddress   = "127.0.0.1:7233"
	defaultTemporalNamespace = "default"
)

// BindFlags registers the connection flags on flags.
func (c *Temporal) BindFlags(flags *pflag.FlagSet) {
	flags.StringVar(&c.Address, "address", EnvOr("TEMPORAL_ADDRESS", defaultTemporalAddress), "Temporal frontend host:port [$TEMPORAL_ADDRESS]")
	flags.StringVar(&c.Namespace, "namespace", EnvOr("TEMPORAL_NAMESPACE", defaultTemporalNamespace), "Temporal namespace [$TEMPORAL_NAMESPACE]")
	flags.StringVar(&c.APIKey, "api-key", os.Getenv("TEMPORAL_API_KEY"), "API key (Temporal Cloud); turns TLS on [$TEMPORAL_API_KEY]")
	flags.BoolVar(&c.TLS, "tls", os.Getenv("TEMPORAL_TLS") == "true", "use TLS even without client certificate or API key [$TEMPORAL_TLS=true]")
	flags.StringVar(&c.TLSCert, "tls-cert", os.Getenv("TEMPORAL_TLS_CERT"), "client certificate file for mTLS, PEM [$TEMPORAL_TLS_CERT]")
	flags.StringVar(&c.TLSKey, "tls-key", os.Getenv("TEMPORAL_TLS_KEY"), "client private key file for mTLS, PEM [$TEMPORAL_TLS_KEY]")
	flags.StringVar(&c.TLSCA, "tls-ca", os.Getenv("TEMPORAL_TLS_CA"), "CA certificate file to verify the server, PEM (default: system roots) [$TEMPORAL_TLS_CA]")
	flags.StringVar(&c.TLSServerName, "tls-server-name", os.Getenv("TEMPORAL_TLS_SERVER_NAME"), "server name to verify in the server's certificate [$TEMPORAL_TLS_SERVER_NAME]")
}

func EnvOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// usesTLS reports whether the connection is encrypted: asked for, or implied
// by any TLS setting or an API key (Temporal Cloud only accepts TLS).
func (c *Temporal) UsesTLS() bool {
	return c.TLS || c.APIKey != "" || c.TLSCert != "" || c.TLSKey != "" || c.TLSCA != "" || c.TLSServerName != ""
}

// clientOptions turns the flags into SDK client options, reading certificate
// files now so that a bad path is reported by flag name.
func (c *Temporal) ClientOptions() (client.Options, error) {
	if c.Address == "" {
		return client.Options{}, errors.New("--address: required (or set TEMPORAL_ADDRESS)")
	}
	if c.Namespace == "" {
		return client.Options{}, errors.New("--namespace: required (or set TEMPORAL_NAMESPACE)")
	}
	options := client.Options{
		HostPort:  c.Address,
		Namespace: c.Namespace,
		Logger:    c.Logger,
		// A nil handler is the SDK's no-op default.
		MetricsHandler: c.MetricsHandler,
	}
	if options.Logger == nil {
		options.Logger = QuietSDKLogger()
	}
	if c.APIKey != "" {
		options.Credentials = client.NewAPIKeyStaticCredentials(c.APIKey)
	}
	if c.UsesTLS() {
		tlsConfig, err := c.TLSConfig()
		if err != nil {
			return client.Options{}, err
		}
		options.ConnectionOptions.TLS = tlsConfig
	}
	return options, nil
}

func (c *Temporal) TLSConfig() (*tls.Config, error) {
	config := &tls.Config{ServerName: c.TLSServerName, MinVersion: tls.VersionTLS12}
	switch {
	case c.TLSCert != "" && c.TLSKey != "":
		pair, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", c.TLSCert, c.TLSKey, err)
		}
		config.Certificates = []tls.Certificate{pair}
	case c.TLSCert != "":
		return nil, errors.New("--tls-cert is set but --tls-key is not: mTLS needs both")
	case c.TLSKey != "":
		return nil, errors.New("--tls-key is set but --tls-cert is not: mTLS needs both")
	}
	if c.TLSCA != "" {
		pem, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate found", c.TLSCA)
		}
		config.RootCAs = pool
	}
	return config, nil
}

// dial connects to Temporal (the SDK checks the server answers; the
// namespace is not checked, so setup can create it).
func (c *Temporal) Dial(ctx context.Context) (client.Client, error) {
	options, err := c.ClientOptions()
	if err != nil {
		return nil, err
	}
	cl, err := client.DialContext(ctx, options)
	if err != nil {
		return nil, fmt.Errorf("connecting to Temporal at %s (namespace %s): %w", c.Address, c.Namespace, err)
	}
	return cl, nil
}

// QuietSDKLogger keeps the SDK's info chatter out of command output.
func QuietSDKLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

package metrics

import (
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprometheus "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
	"go.uber.org/zap"
)

// temporalReportInterval is how often tally copies the SDK's metrics into the
// Prometheus collectors; a scrape sees them at most this late.
const temporalReportInterval = time.Second

// NewTemporalHandler bridges the Temporal SDK's metrics (temporal_request,
// temporal_workflow_task_*, temporal_activity_*...) onto registry through
// the SDK's own tally contrib, as Temporal's samples do. Pass the handler as
// client.Options.MetricsHandler; Close stops the bridge.
func NewTemporalHandler(registry *prometheus.Registry, logger *zap.Logger) (client.MetricsHandler, io.Closer) {
	if logger == nil {
		logger = zap.NewNop()
	}
	reporter := tallyprometheus.NewReporter(tallyprometheus.Options{
		Registerer: registry,
		// Histograms aggregate across workers; summaries do not.
		DefaultTimerType: tallyprometheus.HistogramTimerType,
		// The default panics when the SDK emits one name with two tag
		// sets; losing that series is better than losing the worker.
		OnRegisterError: func(err error) {
			logger.Warn("a Temporal SDK metric could not be registered", zap.Error(err))
		},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprometheus.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, temporalReportInterval)
	return sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)), closer
}

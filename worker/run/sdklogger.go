package run

import (
	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
)

// TemporalLogger routes the Temporal SDK's logs — including what workflows
// and activities log ("Found N provisionable pods", "Launched instance: …")
// — to the worker's zap logger. The SDK speaks key/value pairs, which zap's
// sugared logger takes as they are. Hand-written because zap ships no
// adapter for the SDK's interface; it is the shape of Temporal's own sample.
func TemporalLogger(logger *zap.Logger) sdklog.Logger {
	// Skip the adapter's frame so log lines point at the caller.
	return &temporalLogger{logger: logger.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

type temporalLogger struct{ logger *zap.SugaredLogger }

var _ sdklog.WithLogger = (*temporalLogger)(nil)

func (l *temporalLogger) Debug(msg string, keyvals ...any) { l.logger.Debugw(msg, keyvals...) }
func (l *temporalLogger) Info(msg string, keyvals ...any)  { l.logger.Infow(msg, keyvals...) }
func (l *temporalLogger) Warn(msg string, keyvals ...any)  { l.logger.Warnw(msg, keyvals...) }
func (l *temporalLogger) Error(msg string, keyvals ...any) { l.logger.Errorw(msg, keyvals...) }

// With returns a logger that adds keyvals to every line.
func (l *temporalLogger) With(keyvals ...any) sdklog.Logger {
	return &temporalLogger{logger: l.logger.With(keyvals...)}
}

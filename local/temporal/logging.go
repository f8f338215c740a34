package temporal

import (
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// serverLogger builds the zap logger the Temporal server (and our internal
// client) log to, filtered to o.LogLevel, and a close function for any file
// it opened.
func serverLogger(o Options) (*zap.Logger, func() error, error) {
	level, err := zapcore.ParseLevel(o.LogLevel)
	if err != nil {
		return nil, nil, fmt.Errorf("temporal option LogLevel: %w", err)
	}
	noClose := func() error { return nil }

	if o.Logger != nil {
		logger := o.Logger.Named("temporal")
		// IncreaseLevel can only raise a logger's level (it complains on the
		// logger's error output otherwise), so apply it only when it does.
		if level > zapcore.LevelOf(logger.Core()) {
			logger = logger.WithOptions(zap.IncreaseLevel(level))
		}
		return logger, noClose, nil
	}
	if o.StateDir == "" {
		return zap.NewNop(), noClose, nil
	}

	if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("creating temporal state directory %s: %w", o.StateDir, err)
	}
	path := filepath.Join(o.StateDir, LogFileName)
	file, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("opening temporal log file %s: %w", path, err)
	}
	encoderConfig := zap.NewProductionEncoderConfig()
	encoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(encoderConfig), zapcore.Lock(file), level)
	logger := zap.New(core, zap.ErrorOutput(zapcore.Lock(file)))
	closeFile := func() error {
		_ = logger.Sync()
		return file.Close()
	}
	return logger, closeFile, nil
}

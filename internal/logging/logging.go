// Package logging builds Outpost's zap logger and adapts it for the Temporal SDK.
package logging

import (
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New builds a logger on stderr: format "json" for production, "console"
// for people (levels in colour only when stderr is a terminal: a log file
// or journal gets no escape codes); level debug, info, warn or error.
func New(level, format string) (*zap.Logger, error) {
	cfg, err := config(level, format, isTerminal(os.Stderr))
	if err != nil {
		return nil, err
	}
	return cfg.Build()
}

func config(level, format string, terminal bool) (zap.Config, error) {
	var cfg zap.Config
	if format == "json" {
		cfg = zap.NewProductionConfig()
	} else {
		cfg = zap.NewDevelopmentConfig()
		cfg.DisableStacktrace = true
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
		if terminal {
			cfg.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
	}
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return zap.Config{}, fmt.Errorf("log level: %w", err)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	return cfg, nil
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Temporal adapts a zap logger to the Temporal SDK's log.Logger.
type Temporal struct{ l *zap.SugaredLogger }

// NewTemporal returns the adapter; the SDK's chatter is kept one level down.
func NewTemporal(l *zap.Logger) *Temporal {
	return &Temporal{l: l.WithOptions(zap.AddCallerSkip(1)).Named("temporal").Sugar()}
}

// Debug logs at debug level.
func (t *Temporal) Debug(msg string, keyvals ...any) { t.l.Debugw(msg, keyvals...) }

// Info logs at info level.
func (t *Temporal) Info(msg string, keyvals ...any) { t.l.Infow(msg, keyvals...) }

// Warn logs at warn level.
func (t *Temporal) Warn(msg string, keyvals ...any) { t.l.Warnw(msg, keyvals...) }

// Error logs at error level.
func (t *Temporal) Error(msg string, keyvals ...any) { t.l.Errorw(msg, keyvals...) }

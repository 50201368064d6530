// Package logging builds the structured zap logger both programs use and
// routes client-go's klog output into it, so every line is one JSON event.
package logging

import (
	"fmt"
	"io"

	"github.com/go-logr/zapr"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// Format names accepted by --log-format.
const (
	FormatJSON    = "json"
	FormatConsole = "console"
)

// Options are the logging flags shared by every command.
type Options struct {
	Format string
	Level  string
}

// AddFlags registers --log-format and --log-level.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Format, "log-format", FormatJSON, "log encoding: json or console (for humans)")
	fs.StringVar(&o.Level, "log-level", "info", "minimum level logged: debug, info, warn or error")
}

// New builds a logger writing to w and makes it klog's sink as well.
func (o Options) New(w io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(o.Level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.TimeKey = "ts"
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	switch o.Format {
	case FormatJSON:
		enc = zapcore.NewJSONEncoder(encCfg)
	case FormatConsole:
		encCfg.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(encCfg)
	default:
		return nil, fmt.Errorf("--log-format: %q is neither %q nor %q", o.Format, FormatJSON, FormatConsole)
	}
	logger := zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), level), zap.AddCaller())
	klog.SetLogger(zapr.NewLogger(logger.Named("klog")))
	return logger, nil
}

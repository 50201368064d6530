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
	// FormatText is upstream's name for human-readable lines: console.
	FormatText = "text"
)

// Options are the logging flags shared by every command.
type Options struct {
	Format string
	Level  string
	// Filter is upstream's --startup-log-filter; when set it decides the
	// level instead of Level.
	Filter string
	// Prefix starts every console line, as upstream's --log-prefix does
	// its text lines.
	Prefix string
}

// AddFlags registers --log-format, --log-level and upstream's
// --startup-log-filter and --log-prefix.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Format, "log-format", FormatJSON, "log encoding: json, or console (for humans; upstream's text)")
	fs.StringVar(&o.Level, "log-level", "info", "minimum level logged: debug, info, warn or error")
	fs.StringVar(&o.Filter, "startup-log-filter", "",
		"upstream's log filter, e.g. info,mz_orchestratord=trace: the level of the directive for "+Target+" (trace is debug here), else the global one; overrides --log-level when set")
	fs.StringVar(&o.Prefix, "log-prefix", "", "a prefix for each console line (--log-format=console or text)")
}

// New builds a logger writing to w and makes it klog's sink as well.
func (o Options) New(w io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(o.Level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	if o.Filter != "" {
		if level, err = FilterLevel(o.Filter); err != nil {
			return nil, fmt.Errorf("--startup-log-filter: %w", err)
		}
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.TimeKey = "ts"
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	switch o.Format {
	case FormatJSON:
		enc = zapcore.NewJSONEncoder(encCfg)
	case FormatConsole, FormatText:
		encCfg.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(encCfg)
		if o.Prefix != "" {
			w = &prefixWriter{prefix: []byte(o.Prefix + ": "), w: w}
		}
	default:
		return nil, fmt.Errorf("--log-format: %q is neither %q nor %q (or %q)", o.Format, FormatJSON, FormatConsole, FormatText)
	}
	logger := zap.New(boundedCore{zapcore.NewCore(enc, zapcore.AddSync(w), level)}, zap.AddCaller())
	klog.SetLogger(zapr.NewLogger(logger.Named("klog")))
	return logger, nil
}

// prefixWriter starts each write with prefix: zap writes one line at a
// time, from any goroutine.
type prefixWriter struct {
	prefix []byte
	w      io.Writer
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	line := make([]byte, 0, len(p.prefix)+len(b))
	if _, err := p.w.Write(append(append(line, p.prefix...), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

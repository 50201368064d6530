package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

func TestJSONLoggerCapturesKlog(t *testing.T) {
	var buf bytes.Buffer
	logger, err := Options{Format: FormatJSON, Level: "info"}.New(&buf)
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("from zap", zap.String("k", "v"))
	klog.InfoS("from klog", "lease", "orchestratord-materialize-controller")
	klog.Flush()
	_ = logger.Sync()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one JSON line per event, got %d:\n%s", len(lines), buf.String())
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &ev); err != nil {
		t.Fatalf("klog line is not JSON: %v: %s", err, lines[1])
	}
	if ev["msg"] != "from klog" || ev["lease"] != "orchestratord-materialize-controller" || ev["logger"] != "klog" {
		t.Errorf("klog event not routed through zap with its fields: %v", ev)
	}
}

func TestBadOptionsAreRejected(t *testing.T) {
	for _, o := range []Options{{Format: "xml", Level: "info"}, {Format: FormatJSON, Level: "loud"}} {
		if _, err := o.New(&bytes.Buffer{}); err == nil {
			t.Errorf("%+v: want an error", o)
		}
	}
}

// Upstream's --startup-log-filter, as tracing_subscriber's EnvFilter reads it
// for events of mz_orchestratord.
func TestFilterLevel(t *testing.T) {
	for filter, want := range map[string]zapcore.Level{
		"info":                              zapcore.InfoLevel,
		"INFO,mz_orchestratord=TRACE":       zapcore.DebugLevel, // upstream's chart's default
		"warn":                              zapcore.WarnLevel,
		"mz_orchestratord=error,debug":      zapcore.ErrorLevel, // the crate's directive wins over the global one
		"debug,mz_orchestratord=error":      zapcore.ErrorLevel,
		"mz=warn,mz_orchestratord=info":     zapcore.InfoLevel, // the longest target wins
		"mz_orchestratord=info,mz=warn":     zapcore.InfoLevel,
		"mz=warn":                           zapcore.WarnLevel, // a prefix of the target covers it
		"info,info=debug":                   zapcore.InfoLevel, // a target that is not ours
		"kube=debug":                        Off,               // nothing covers mz_orchestratord
		"off":                               Off,
		"error,mz_orchestratord::k8s=debug": zapcore.DebugLevel, // part of the crate
		"mz_orchestratord":                  zapcore.DebugLevel, // a bare target: all its events
		"3":                                 zapcore.InfoLevel,
		"info,mz_orchestratord[reconcile{name=x}]=trace": zapcore.InfoLevel, // span filters are ignored
		" info , ":  zapcore.InfoLevel,
		"info,info": zapcore.InfoLevel,
		"error,mz_orchestratord=warn,mz_orchestratord=debug": zapcore.DebugLevel, // the last of equal targets
	} {
		got, err := FilterLevel(filter)
		if err != nil || got != want {
			t.Errorf("FilterLevel(%q) = %v, %v; want %v", filter, got, err, want)
		}
	}
	if _, err := FilterLevel("mz_orchestratord=loud"); err == nil {
		t.Error("a bad level must be refused")
	}
}

func TestStartupLogFilterOverridesLevel(t *testing.T) {
	var buf bytes.Buffer
	logger, err := Options{Format: FormatJSON, Level: "info", Filter: "INFO,mz_orchestratord=TRACE"}.New(&buf)
	if err != nil {
		t.Fatal(err)
	}
	logger.Debug("visible")
	if !strings.Contains(buf.String(), "visible") {
		t.Errorf("mz_orchestratord=TRACE must log debug lines: %q", buf.String())
	}
	buf.Reset()
	logger, err = Options{Format: FormatJSON, Level: "info", Filter: "off"}.New(&buf)
	if err != nil {
		t.Fatal(err)
	}
	logger.Error("hidden")
	if buf.Len() != 0 {
		t.Errorf("off must log nothing: %q", buf.String())
	}
}

// Upstream's text format is console here, with its --log-prefix.
func TestTextFormatWithPrefix(t *testing.T) {
	var buf bytes.Buffer
	logger, err := Options{Format: FormatText, Level: "info", Prefix: "orchestratord"}.New(&buf)
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("one")
	logger.Info("two")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "orchestratord: ") || !strings.HasPrefix(lines[1], "orchestratord: ") ||
		!strings.Contains(lines[0], "INFO") {
		t.Errorf("want two prefixed console lines, got %q", buf.String())
	}
}

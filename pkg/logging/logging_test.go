package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap"
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

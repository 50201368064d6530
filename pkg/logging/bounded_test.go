package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"k8s.io/klog/v2"

	"github.com/materializeinc/orchestratord/pkg/boundedtext"
)

type stringer string

func (s stringer) String() string { return string(s) }

// Whatever a call site logs (an error quoting a tenant's megabyte name, a
// long message, a field set once on a child logger, a klog line), each text
// of the line is cut to MaxFieldBytes and marked, and the line stays one
// JSON event; short texts are written as they are.
func TestEveryTextOfALineIsBounded(t *testing.T) {
	var buf bytes.Buffer
	logger, err := Options{Format: FormatJSON, Level: "info"}.New(&buf)
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("é", 1<<20)
	logger.With(zap.String("with", huge)).Info(huge,
		zap.String("string", huge), zap.Error(errors.New(huge)), zap.Stringer("stringer", stringer(huge)),
		zap.String("short", "kept"), zap.Int("n", 7))
	klog.InfoS(huge, "klog", huge)
	klog.Flush()
	_ = logger.Sync()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2", len(lines))
	}
	for _, line := range lines {
		if len(line) > 8*MaxFieldBytes {
			t.Errorf("a line of %d bytes", len(line))
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		for key, v := range ev {
			if s, ok := v.(string); ok && strings.HasPrefix(s, "é") && (len(s) > MaxFieldBytes || !strings.HasSuffix(s, boundedtext.Marker)) {
				t.Errorf("%s: %d bytes, not cut to %d and marked", key, len(s), MaxFieldBytes)
			}
		}
	}
	var first map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &first)
	for _, key := range []string{"msg", "with", "string", "error", "stringer"} {
		if s, _ := first[key].(string); !strings.HasSuffix(s, boundedtext.Marker) {
			t.Errorf("%s not cut: %.40q", key, s)
		}
	}
	if first["short"] != "kept" || first["n"] != float64(7) {
		t.Errorf("short fields changed: %v, %v", first["short"], first["n"])
	}
}

type nilError struct{ msg string }

func (e *nilError) Error() string { return e.msg }

// A typed nil error or Stringer (whose method panics) is written as zap
// writes it, not a panic of the goroutine that logs.
func TestATypedNilIsWrittenAsZapWritesIt(t *testing.T) {
	var buf bytes.Buffer
	logger, err := Options{Format: FormatJSON, Level: "info"}.New(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var typedNil *nilError
	logger.Info("typed nil", zap.Error(typedNil), zap.Stringer("stringer", (*stringerPtr)(nil)))
	if !strings.Contains(buf.String(), `"msg":"typed nil"`) {
		t.Fatalf("line %q", buf.String())
	}
}

type stringerPtr struct{ s string }

func (s *stringerPtr) String() string { return s.s }

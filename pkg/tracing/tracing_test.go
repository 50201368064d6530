package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// recorder turns tracing on with an in-memory recorder until the test ends.
func recorder(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(Use(tp))
	return rec
}

// While tracing is off, what the hot paths call allocates nothing.
func TestOffCostsNoAllocation(t *testing.T) {
	t.Cleanup(Use(nil))
	ctx := context.Background()
	header := http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	log := zap.NewNop()
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := Start(ctx, "reconcile materialize", trace.SpanKindInternal)
		if span.IsRecording() || c != ctx {
			t.Fatal("a span recorded while tracing is off")
		}
		_, span = StartServer(ctx, header, "ConversionReview")
		Fail(span, context.Canceled)
		if Logger(log, span) != log {
			t.Fatal("a logger built while tracing is off")
		}
		span.End()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per span while tracing is off, want 0", allocs)
	}
	if Enabled() {
		t.Error("Enabled with no provider")
	}
}

func TestLoggerCarriesTheSpansIDs(t *testing.T) {
	recorder(t)
	_, span := Start(context.Background(), "reconcile x", trace.SpanKindInternal)
	defer span.End()
	var buf bytes.Buffer
	base := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zapcore.InfoLevel))
	Logger(base, span).Info("within")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	if line["trace_id"] != sc.TraceID().String() || line["span_id"] != sc.SpanID().String() {
		t.Errorf("log line %v, want trace_id %s and span_id %s", line, sc.TraceID(), sc.SpanID())
	}
}

// A review the API server traces joins its trace.
func TestStartServerJoinsTheCallersTrace(t *testing.T) {
	rec := recorder(t)
	header := http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	_, span := StartServer(context.Background(), header, "ConversionReview")
	span.End()
	got := rec.Ended()[0]
	if got.SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || got.Parent().SpanID().String() != "b7ad6b7169203331" ||
		got.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %s in trace %s, parent %s, kind %v", got.Name(), got.SpanContext().TraceID(), got.Parent().SpanID(), got.SpanKind())
	}
	_, span = StartServer(context.Background(), http.Header{}, "ConversionReview")
	span.End()
	if got := rec.Ended()[1]; got.Parent().IsValid() {
		t.Errorf("a review without a traceparent has parent %v", got.Parent())
	}
	if !strings.HasPrefix(Scope, "github.com/") {
		t.Errorf("scope %q", Scope)
	}
}

// go test -run '^$' -bench Span -benchmem ./pkg/tracing
//
// What a reconcile or a review pays for its span, off and on (recorded in
// memory, not exported).
func BenchmarkSpan(b *testing.B) {
	ctx := context.Background()
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			var tp trace.TracerProvider
			if on {
				tp = sdktrace.NewTracerProvider()
			}
			b.Cleanup(Use(tp))
			b.ReportAllocs()
			for b.Loop() {
				_, span := Start(ctx, "reconcile materialize", trace.SpanKindInternal)
				if span.IsRecording() {
					span.SetAttributes()
				}
				span.End()
			}
		})
	}
}

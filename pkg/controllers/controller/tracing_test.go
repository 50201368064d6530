package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/materializeinc/orchestratord/pkg/tracing"
)

type reconcileFunc func(ctx context.Context, key string) (Result, error)

func (f reconcileFunc) Reconcile(ctx context.Context, key string) (Result, error) { return f(ctx, key) }

// Each reconcile is a span, "reconcile <controller>", with the object's
// namespace and name; a failure marks it, and the loop's log line (and the
// reconciler's, through Logger) carries its ids.
func TestReconcileSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	var buf bytes.Buffer
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zapcore.DebugLevel))
	var inside trace.SpanContext
	c := New("materialize", reconcileFunc(func(ctx context.Context, key string) (Result, error) {
		inside = trace.SpanContextFromContext(ctx)
		Logger(ctx, zap.NewNop()).Info("from the reconciler")
		return Result{}, errors.New("environmentd refused the promotion")
	}), 1, log, nil, nil)
	q := newTermQueue()
	defer q.ShutDown()
	q.Add("ns1/prod")
	c.processNext(context.Background(), q, log)

	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if s.Name() != "reconcile materialize" || attrs["controller"] != "materialize" || attrs["namespace"] != "ns1" || attrs["name"] != "prod" {
		t.Errorf("span %q %v", s.Name(), attrs)
	}
	if s.Status().Code != codes.Error || !strings.Contains(s.Status().Description, "refused the promotion") {
		t.Errorf("status %+v", s.Status())
	}
	if inside.SpanID() != s.SpanContext().SpanID() {
		t.Error("the reconciler does not run within the span")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want the reconciler's line and the loop's, got %q", buf.String())
	}
	for _, l := range lines {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatal(err)
		}
		if line["trace_id"] != s.SpanContext().TraceID().String() || line["span_id"] != s.SpanContext().SpanID().String() {
			t.Errorf("log line %v lacks the span's ids", line)
		}
	}
}

// While tracing is off the reconciler logs with its own logger, and its
// context has no span.
func TestNoSpanWhileTracingIsOff(t *testing.T) {
	t.Cleanup(tracing.Use(nil))
	own := zap.NewNop()
	var got *zap.Logger
	var sc trace.SpanContext
	c := New("console", reconcileFunc(func(ctx context.Context, key string) (Result, error) {
		got, sc = Logger(ctx, own), trace.SpanContextFromContext(ctx)
		return Result{}, nil
	}), 1, zap.NewNop(), nil, nil)
	q := newTermQueue()
	defer q.ShutDown()
	q.Add("ns1/prod")
	c.processNext(context.Background(), q, zap.NewNop())
	if got != own || sc.IsValid() {
		t.Errorf("logger %p (own %p), span context %v", got, own, sc)
	}
}

// Package tracing is the OpenTelemetry tracing of both programs: upstream
// orchestratord's tracing flags, the OTLP exporter they configure, and the
// spans the programs start (a reconcile, a conversion review, a call to
// environmentd's leader API) with their ids in the log lines written
// within them. Tracing is off without --opentelemetry-endpoint, and then
// starting a span costs an atomic load and allocates nothing.
package tracing

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// Scope names the instrumentation: the tracer of every span here.
const Scope = "github.com/materializeinc/orchestratord"

// active is the tracer of this process's spans; nil while tracing is off.
var active atomic.Pointer[tracer]

type tracer struct{ trace.Tracer }

// noop is what Start returns while tracing is off: it records nothing
// and, being a package value, costs no allocation.
var noop = trace.SpanFromContext(context.Background())

// Use makes tp the provider of the spans this process starts; nil turns
// tracing off. It returns a function that restores the previous one (for
// tests).
func Use(tp trace.TracerProvider) (restore func()) {
	var next *tracer
	if tp != nil {
		next = &tracer{tp.Tracer(Scope)}
	}
	prev := active.Swap(next)
	return func() { active.Store(prev) }
}

// Enabled tells whether spans are recorded.
func Enabled() bool { return active.Load() != nil }

// Start starts a span named name, a child of ctx's span. While tracing is
// off it returns ctx and a span that records nothing, allocating nothing;
// callers set attributes only when span.IsRecording(), as building them
// allocates.
func Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	t := active.Load()
	if t == nil {
		return ctx, noop
	}
	return t.Start(ctx, name, trace.WithSpanKind(kind))
}

// StartServer is Start for a request served: the span joins the caller's
// trace when the request carries one (a W3C traceparent header, which the
// API server sends webhooks when its own tracing is on).
func StartServer(ctx context.Context, header http.Header, name string) (context.Context, trace.Span) {
	t := active.Load()
	if t == nil {
		return ctx, noop
	}
	ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(header))
	return t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
}

// MaxText bounds every text a span keeps that a request can fill (a
// review's uid, an error naming an object): spans wait in the export queue
// (--opentelemetry-max-batch-queue-size of them) long after their request,
// so a client must not make one hold megabytes.
const MaxText = 1024

// SpanLimits are the limits of this process's spans: the SDK's, with
// attribute values (an error's message in its event included) cut at
// MaxText.
func SpanLimits() sdktrace.SpanLimits {
	l := sdktrace.NewSpanLimits()
	l.AttributeValueLengthLimit = MaxText
	return l
}

// Fail marks span as failed with err's message (a no-op for a span that
// records nothing, or a nil err).
func Fail(span trace.Span, err error) {
	if err == nil || !span.IsRecording() {
		return
	}
	span.RecordError(err)
	SetError(span, err.Error())
}

// SetError marks span as failed, with Text(description): the SDK limits
// attributes, not a status.
func SetError(span trace.Span, description string) {
	if !span.IsRecording() {
		return
	}
	span.SetStatus(codes.Error, Text(description))
}

// Text is s cut at MaxText bytes (on a rune boundary) and copied, for a
// span to keep: a slice of a request's string would keep the whole
// request's buffer alive as long as the span.
func Text(s string) string {
	if len(s) > MaxText {
		s = strings.ToValidUTF8(s[:MaxText], "")
	}
	return strings.Clone(s)
}

// Logger is log with the trace_id and span_id of span, so a line written
// within it leads to the trace; log itself when span records nothing.
func Logger(log *zap.Logger, span trace.Span) *zap.Logger {
	if !span.IsRecording() {
		return log
	}
	sc := span.SpanContext()
	return log.With(zap.String("trace_id", sc.TraceID().String()), zap.String("span_id", sc.SpanID().String()))
}

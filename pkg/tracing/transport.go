package tracing

import (
	"io"
	"net/http"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport traces each request rt makes within a recording span as a
// client span, its child, named "<method> <route>", and passes the trace on
// in a W3C traceparent header. route gives a request's path with whatever
// varies per object taken out (nil: the path as it is), so that span names
// stay few. Outside a recording span it only calls rt. (otelhttp does this
// and more, but also records metrics and links another module for four
// calls per rollout.)
func Transport(rt http.RoundTripper, route func(*http.Request) string) http.RoundTripper {
	return &transport{rt: rt, route: route}
}

type transport struct {
	rt    http.RoundTripper
	route func(*http.Request) string
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	parent := trace.SpanFromContext(req.Context())
	if !parent.IsRecording() {
		return t.rt.RoundTrip(req)
	}
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", req.Method),
		attribute.String("url.full", req.URL.Redacted()),
		attribute.String("server.address", req.URL.Hostname()),
	}
	port := req.URL.Port()
	if port == "" {
		port = map[bool]string{true: "443", false: "80"}[req.URL.Scheme == "https"]
	}
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, attribute.Int("server.port", p))
	}
	route := req.URL.Path
	if t.route != nil {
		route = t.route(req)
		attrs = append(attrs, attribute.String("url.template", route))
	}
	ctx, span := parent.TracerProvider().Tracer(Scope).Start(req.Context(), req.Method+" "+route,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	// A RoundTripper must not change the request it is given.
	req = req.Clone(ctx)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		span.SetAttributes(attribute.String("error.type", "transport"))
		Fail(span, err)
		span.End()
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetAttributes(attribute.String("error.type", strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, resp.Status)
	}
	// The call lasts until its body is read.
	resp.Body = &endBody{ReadCloser: resp.Body, end: sync.OnceFunc(func() { span.End() })}
	return resp, nil
}

// endBody ends a span when the body is read to its end or closed.
type endBody struct {
	io.ReadCloser
	end func()
}

func (b *endBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end()
	}
	return n, err
}

func (b *endBody) Close() error {
	b.end()
	return b.ReadCloser.Close()
}

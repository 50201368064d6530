package environmentd

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/materializeinc/orchestratord/pkg/tracing"
)

// Within a reconcile's span every leader API request, the login included,
// is a child span, and environmentd is passed the trace.
func TestCallsAreChildSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	var traceparents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparents = append(traceparents, r.Header.Get("Traceparent"))
		if r.URL.Path == LoginPath {
			http.SetCookie(w, &http.Cookie{Name: "mz_session", Value: "s"})
			return
		}
		_, _ = io.WriteString(w, `{"status":"ReadyToPromote"}`)
	}))
	defer srv.Close()
	wrapped := 0
	c := &Client{Wrap: func(rt http.RoundTripper) http.RoundTripper { wrapped++; return rt }}
	ctx, parent := tracing.Start(context.Background(), "reconcile materialize", trace.SpanKindInternal)
	if _, err := c.WithPassword("secret").Status(ctx, srv.URL); err != nil {
		t.Fatal(err)
	}
	parent.End()
	var names []string
	for _, s := range rec.Ended() {
		if s.Name() == "reconcile materialize" {
			continue
		}
		names = append(names, s.Name())
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: parent %s, kind %v", s.Name(), s.Parent().SpanID(), s.SpanKind())
		}
	}
	if len(names) != 2 || names[0] != "POST "+LoginPath || names[1] != "GET "+StatusPath {
		t.Errorf("child spans %q", names)
	}
	if len(traceparents) != 2 || traceparents[0] == "" || traceparents[1] == "" || wrapped != 1 {
		t.Errorf("traceparents %q, Wrap called %d times", traceparents, wrapped)
	}
}

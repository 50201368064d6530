package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

func TestTransportMakesChildSpans(t *testing.T) {
	rec := recorder(t)
	var traceparent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparent = r.Header.Get("Traceparent")
		if r.URL.Path == "/api/leader/promote" {
			http.Error(w, "not ready", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, `{"status":"IsLeader"}`)
	}))
	defer srv.Close()
	client := &http.Client{Transport: Transport(http.DefaultTransport, nil)}
	get := func(ctx context.Context, method, path string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}

	// Outside a span: nothing traced, nothing sent.
	get(context.Background(), http.MethodGet, "/api/leader/status")
	if traceparent != "" || len(rec.Ended()) != 0 {
		t.Fatalf("a call outside a span: traceparent %q, spans %d", traceparent, len(rec.Ended()))
	}

	ctx, parent := Start(context.Background(), "reconcile materialize", trace.SpanKindInternal)
	get(ctx, http.MethodGet, "/api/leader/status")
	get(ctx, http.MethodPost, "/api/leader/promote")
	parent.End()
	ended := rec.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans, want the two calls and their parent", len(ended))
	}
	status, promote := ended[0], ended[1]
	for _, s := range []struct {
		name string
		got  string
	}{{"GET /api/leader/status", status.Name()}, {"POST /api/leader/promote", promote.Name()}} {
		if s.got != s.name {
			t.Errorf("span %q, want %q", s.got, s.name)
		}
	}
	for _, s := range ended[:2] {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() ||
			s.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: parent %s kind %v, want a client child of %s", s.Name(), s.Parent().SpanID(), s.SpanKind(), parent.SpanContext().SpanID())
		}
	}
	// The callee gets the call's own span as its parent.
	if want := "00-" + promote.SpanContext().TraceID().String() + "-" + promote.SpanContext().SpanID().String() + "-01"; traceparent != want {
		t.Errorf("traceparent %q, want %q", traceparent, want)
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range promote.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	if attrs["http.response.status_code"].AsInt64() != 400 || attrs["http.request.method"].AsString() != "POST" ||
		!strings.HasSuffix(attrs["url.full"].AsString(), "/api/leader/promote") || attrs["server.address"].AsString() != "127.0.0.1" {
		t.Errorf("promote attributes %v", attrs)
	}
	if promote.Status().Code != codes.Error || status.Status().Code == codes.Error {
		t.Errorf("statuses: promote %v, status %v", promote.Status(), status.Status())
	}
}

func TestTransportRecordsTransportErrors(t *testing.T) {
	rec := recorder(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	ctx, parent := Start(context.Background(), "reconcile materialize", trace.SpanKindInternal)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/leader/status", nil)
	if _, err := (&http.Client{Transport: Transport(http.DefaultTransport, nil)}).Do(req); err == nil {
		t.Fatal("a closed server answered")
	}
	parent.End()
	if got := rec.Ended()[0]; got.Status().Code != codes.Error || len(got.Events()) == 0 {
		t.Errorf("a failed call: status %v, events %v", got.Status(), got.Events())
	}
}

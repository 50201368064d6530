package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/materializeinc/orchestratord/pkg/tracing"
)

// Each review is a server span, in the API server's trace when it sends
// one, with the review's uid; a failed one is marked and its log line
// carries the span's ids.
func TestReviewSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithRawSpanLimits(tracing.SpanLimits()))))
	var buf bytes.Buffer
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zapcore.InfoLevel))
	h := &ConvertHandler{Log: log, Metrics: NewMetrics(prometheus.NewRegistry())}
	send := func(body string) {
		req := httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	send(reviewBody("materialize.cloud/v1", alphaObject))
	send(reviewBody("materialize.cloud/v9", alphaObject))
	send("{")
	// A client's uid of 64 KiB is refused: the span, queued for export long
	// after the request, keeps none of it.
	send(strings.Replace(reviewBody("materialize.cloud/v1", alphaObject), `"uid":"u-1"`, `"uid":"`+strings.Repeat("u", 64<<10)+`"`, 1))

	attrs := func(s sdktrace.ReadOnlySpan) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes() {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		return m
	}
	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want one per review", len(spans))
	}
	if a := attrs(spans[3]); a["uid"] != "" || a["result"] != "bad_request" {
		t.Errorf("a 64 KiB uid: %v, want refused and not kept", a)
	}
	spans = spans[:3]
	ok, failed, bad := spans[0], spans[1], spans[2]
	for _, s := range spans {
		if s.Name() != "ConversionReview" || s.SpanKind() != trace.SpanKindServer ||
			s.SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || s.Parent().SpanID().String() != "b7ad6b7169203331" {
			t.Errorf("span %q kind %v in trace %s under %s", s.Name(), s.SpanKind(), s.SpanContext().TraceID(), s.Parent().SpanID())
		}
	}
	if a := attrs(ok); a["uid"] != "u-1" || a["desiredAPIVersion"] != "materialize.cloud/v1" || a["objects"] != "1" || a["result"] != "success" ||
		ok.Status().Code == codes.Error {
		t.Errorf("converted: %v %+v", a, ok.Status())
	}
	if a := attrs(failed); a["result"] != "failure" || a["desiredAPIVersion"] != "other" || failed.Status().Code != codes.Error {
		t.Errorf("failed: %v %+v", a, failed.Status())
	}
	if a := attrs(bad); a["result"] != "bad_request" || a["http.response.status_code"] != "400" || bad.Status().Code != codes.Error {
		t.Errorf("malformed: %v %+v", a, bad.Status())
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	lines = lines[:min(len(lines), 2)] // the third is the long uid's refusal
	if len(lines) != 2 || lines[0]["msg"] != "conversion failed" || lines[0]["span_id"] != failed.SpanContext().SpanID().String() ||
		lines[0]["trace_id"] != "0af7651916cd43dd8448eb211c80319c" || lines[1]["span_id"] != bad.SpanContext().SpanID().String() {
		t.Errorf("log lines %v", lines)
	}
}

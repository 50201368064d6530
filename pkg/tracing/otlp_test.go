package tracing

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/proto"

	"github.com/materializeinc/orchestratord/test/otlp"
)

// options parses args as the programs do.
func options(t *testing.T, args ...string) *Options {
	t.Helper()
	o := &Options{}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func bufferLog() (*zap.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zapcore.InfoLevel)), &buf
}

// Spans reach a collector over either protocol, with upstream's flags:
// headers, resource attributes over service.name, batching.
func TestExport(t *testing.T) {
	for _, tc := range []struct {
		protocol string
		receiver func(testing.TB) *otlp.Receiver
	}{{ProtocolHTTP, otlp.NewHTTP}, {ProtocolGRPC, otlp.NewGRPC}} {
		t.Run(tc.protocol, func(t *testing.T) {
			r := tc.receiver(t)
			o := options(t, "--opentelemetry-endpoint="+r.URL, "--opentelemetry-protocol="+tc.protocol,
				"--opentelemetry-header=authorization=Bearer s3cret,x-team=db", "--opentelemetry-resource=deployment.environment=test",
				"--opentelemetry-resource=orchestratord.component=overridden", "--opentelemetry-sched-delay=50ms")
			log, _ := bufferLog()
			stop, err := o.Start(log, "webhook")
			if err != nil {
				t.Fatal(err)
			}
			ctx, parent := Start(context.Background(), "reconcile materialize", trace.SpanKindInternal)
			_, child := Start(ctx, "GET /api/leader/status", trace.SpanKindClient)
			child.End()
			parent.End()
			if err := stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if Enabled() {
				t.Error("tracing still on after stop")
			}
			p := r.WaitFor(t, "reconcile materialize", func(s otlp.Span) bool { return s.Name == "reconcile materialize" })
			c := r.WaitFor(t, "the call", func(s otlp.Span) bool { return s.Name == "GET /api/leader/status" })
			if c.ParentSpanID != p.SpanID || c.TraceID != p.TraceID || c.Kind != tracepb.Span_SPAN_KIND_CLIENT {
				t.Errorf("child %+v of %+v", c, p)
			}
			if p.Resource["service.name"] != ServiceName || p.Resource["deployment.environment"] != "test" ||
				p.Resource["orchestratord.component"] != "overridden" || p.Scope != Scope {
				t.Errorf("resource %v, scope %q", p.Resource, p.Scope)
			}
			h := r.Headers()[0]
			if h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Team") != "db" {
				t.Errorf("export headers %v", h)
			}
		})
	}
}

// A collector that is briefly unavailable loses no spans.
func TestExportRetriesTransientFailures(t *testing.T) {
	defer func(d time.Duration) { firstBackoff = d }(firstBackoff)
	firstBackoff = 10 * time.Millisecond
	for _, tc := range []struct {
		protocol string
		receiver func(testing.TB) *otlp.Receiver
		code     int
	}{{ProtocolHTTP, otlp.NewHTTP, http.StatusServiceUnavailable}, {ProtocolGRPC, otlp.NewGRPC, 14}} {
		t.Run(tc.protocol, func(t *testing.T) {
			r := tc.receiver(t)
			var refused atomic.Int32
			r.FailWith(func() int {
				if refused.Add(1) <= 2 {
					return tc.code
				}
				return 0
			})
			stop, err := options(t, "--opentelemetry-endpoint="+r.URL, "--opentelemetry-protocol="+tc.protocol).Start(zap.NewNop(), "webhook")
			if err != nil {
				t.Fatal(err)
			}
			_, span := Start(context.Background(), "ConversionReview", trace.SpanKindServer)
			span.End()
			if err := stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			r.WaitFor(t, "ConversionReview", func(s otlp.Span) bool { return s.Name == "ConversionReview" })
			if refused.Load() != 3 {
				t.Errorf("%d attempts, want 2 refused and 1 taken", refused.Load())
			}
		})
	}
}

// A refusal that will not change is not retried.
func TestExportGivesUpOnPermanentFailures(t *testing.T) {
	for _, tc := range []struct {
		protocol string
		receiver func(testing.TB) *otlp.Receiver
		code     int
	}{{ProtocolHTTP, otlp.NewHTTP, http.StatusBadRequest}, {ProtocolGRPC, otlp.NewGRPC, 3}} {
		r := tc.receiver(t)
		var attempts atomic.Int32
		r.FailWith(func() int { attempts.Add(1); return tc.code })
		// A user and password in the endpoint are used, never shown.
		c, err := newClient(strings.Replace(r.URL, "://", "://t0ken:s3cret@", 1), tc.protocol, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = c.UploadTraces(context.Background(), []*tracepb.ResourceSpans{{}})
		if err == nil || attempts.Load() != 1 {
			t.Errorf("%s: %d attempts, error %v; want one attempt and an error", tc.protocol, attempts.Load(), err)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "t0ken")) {
			t.Errorf("%s: the error shows the endpoint's credentials: %v", tc.protocol, err)
		}
	}
}

// The request is what the collector's generated code encodes.
func TestMarshalRequest(t *testing.T) {
	spans := []*tracepb.ResourceSpans{
		{Resource: &resourcepb.Resource{DroppedAttributesCount: 1}, ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "a"}}}}},
		{SchemaUrl: "b"},
	}
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: spans})
	if err != nil {
		t.Fatal(err)
	}
	got, err := marshalRequest(spans, false)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("marshalRequest = %x, %v; want %x", got, err, want)
	}
	framed, _ := marshalRequest(spans, true)
	if !bytes.Equal(framed[5:], want) || framed[0] != 0 || int(framed[1])<<24|int(framed[2])<<16|int(framed[3])<<8|int(framed[4]) != len(want) {
		t.Errorf("gRPC frame %x", framed[:5])
	}
}

func TestPartialSuccess(t *testing.T) {
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 3, ErrorMessage: "too old"}})
	if err := partialSuccess(b); err == nil || !strings.Contains(err.Error(), "rejected 3 spans: too old") {
		t.Errorf("partial success: %v", err)
	}
	b, _ = proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{}})
	if err := partialSuccess(b); err != nil {
		t.Errorf("an empty partial success is a success: %v", err)
	}
}

func TestOptions(t *testing.T) {
	t.Cleanup(Use(nil))
	for args, want := range map[string]string{
		"--opentelemetry-endpoint=collector:4317":                                                     "not an http:// or https:// URL",
		"--opentelemetry-endpoint=http://c:4317 --opentelemetry-protocol=thrift":                      "--opentelemetry-protocol",
		"--opentelemetry-endpoint=http://c:4317 --opentelemetry-header=novalue":                       "not NAME=VALUE",
		"--opentelemetry-endpoint=http://c:4317 --opentelemetry-header=bad:name=v":                    "header 1 has no valid name",
		"--opentelemetry-endpoint=http://c:4317 --opentelemetry-header=x-key=a\x01":                   "the value of header 1 (x-key)",
		"--opentelemetry-endpoint=http://c:4317 --opentelemetry-resource==v":                          "not NAME=VALUE",
		"--opentelemetry-endpoint=http://c:4317 --startup-opentelemetry-filter=mz_orchestratord=loud": "--startup-opentelemetry-filter",
		"--opentelemetry-endpoint=http://c:4317 --opentelemetry-max-export-batch-size=0":              "must be positive",
	} {
		if _, err := options(t, strings.Fields(args)...).Start(zap.NewNop(), "webhook"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one with %q", args, err, want)
		}
	}
	// Headers read as pflag's string slices: commas separate, quotes as in
	// CSV, repeats add.
	if o := options(t, `--opentelemetry-header=a=1,"b=2,3"`, "--opentelemetry-header=c=4"); !slices.Equal(o.Headers, []string{"a=1", "b=2,3", "c=4"}) {
		t.Errorf("headers %q", o.Headers)
	}
	// What may be a credential is never quoted: a header split at a base64
	// value's padding, a header without '=', a password in a URL that does
	// not parse.
	for _, args := range [][]string{
		{"--opentelemetry-endpoint=http://c:4317", "--opentelemetry-header=Authorization: Basic czNjcmV0=="},
		{"--opentelemetry-endpoint=http://c:4317", "--opentelemetry-header=Bearer czNjcmV0"},
		{"--opentelemetry-endpoint=http://user:czNjcmV0@c:4317/%zz"},
		{"--opentelemetry-endpoint=czNjcmV0@c:4317"},
		{"--opentelemetry-endpoint=user:czNjcmV0@c:4317"},
		{"--opentelemetry-endpoint=http://c:4317", "--opentelemetry-header=Authorization=czNjcmV0\nx=y"},
		{"--opentelemetry-endpoint=http://c:4317", `--opentelemetry-header=Authorization=Basic "czNjcmV0`},
	} {
		_, err := options(t, args...).Start(zap.NewNop(), "webhook")
		if err == nil || strings.Contains(err.Error(), "czNjcmV0") {
			t.Errorf("%v: error %v, want one that does not show the credential", args, err)
		}
	}
	// Without an endpoint, or with a filter that leaves out info events,
	// nothing is traced.
	for _, args := range [][]string{nil, {"--opentelemetry-endpoint=http://c:4317", "--startup-opentelemetry-filter=warn"},
		{"--opentelemetry-endpoint=http://c:4317", "--startup-opentelemetry-filter=info,mz_orchestratord=off"}} {
		stop, err := options(t, args...).Start(zap.NewNop(), "webhook")
		if err != nil || Enabled() {
			t.Errorf("%v: error %v, enabled %v", args, err, Enabled())
		}
		_ = stop(context.Background())
	}
	// Upstream's humantime durations.
	o := options(t, "--opentelemetry-sched-delay=1s 500ms", "--opentelemetry-max-export-timeout=2min")
	if o.SchedDelay != 1500*time.Millisecond || o.MaxExportTimeout != 2*time.Minute {
		t.Errorf("durations %v, %v", o.SchedDelay, o.MaxExportTimeout)
	}
	if d := options(t); d.SchedDelay != 5*time.Second || d.MaxExportTimeout != 30*time.Second || d.MaxBatchQueueSize != 2048 ||
		d.MaxExportBatchSize != 512 || d.Protocol != ProtocolGRPC || d.Filter != "info" {
		t.Errorf("defaults %+v, want upstream's", d)
	}
}

// Upstream's Sentry flags are taken, and said to do nothing.
func TestSentryIsNotSupported(t *testing.T) {
	log, buf := bufferLog()
	if _, err := options(t, "--sentry-dsn=https://key@sentry.example/1", "--sentry-tag=a=b").Start(log, "controllers"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "does not report to Sentry") {
		t.Errorf("no warning: %s", buf.String())
	}
}

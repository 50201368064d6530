package tracing

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/zapr"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/net/http/httpguts"

	"github.com/materializeinc/orchestratord/pkg/humantime"
	"github.com/materializeinc/orchestratord/pkg/logging"
	"github.com/materializeinc/orchestratord/pkg/version"
)

// ServiceName is the service.name of every span, upstream's.
const ServiceName = "orchestratord"

// Options are upstream orchestratord's tracing flags (mz_orchestrator_tracing's
// TracingCliArgs) under their names, defaults and environment variables
// (ORCHESTRATORD_OPENTELEMETRY_ENDPOINT, ...), so an upstream
// configuration carries over. The logging ones are in pkg/logging.
type Options struct {
	Endpoint string
	// Protocol is this operator's: upstream speaks gRPC only.
	Protocol string
	Headers  []string
	// malformedHeaders counts --opentelemetry-header values that were not
	// a comma-separated list (headerList).
	malformedHeaders     int
	Resource             []string
	Filter               string
	MaxBatchQueueSize    int
	MaxExportBatchSize   int
	MaxConcurrentExports int
	SchedDelay           time.Duration
	MaxExportTimeout     time.Duration
	// Upstream's Sentry flags: this operator does not report to Sentry;
	// the controllers pass them on to environmentd, as upstream does.
	SentryDSN, SentryEnvironment string
	SentryTags                   []string
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Endpoint, "opentelemetry-endpoint", "",
		"export spans to this OTLP collector, with its scheme (e.g. http://otel-collector:4317); empty: no tracing")
	fs.StringVar(&o.Protocol, "opentelemetry-protocol", ProtocolGRPC,
		"the endpoint's protocol: grpc (upstream's) or http/protobuf (POST to the endpoint's path, /v1/traces when it has none)")
	fs.Var(&headerList{values: &o.Headers, malformed: &o.malformedHeaders}, "opentelemetry-header", "NAME=VALUE: a header of every export, e.g. a collector's credentials (repeat the flag or separate with commas)")
	fs.StringSliceVar(&o.Resource, "opentelemetry-resource", nil,
		"NAME=VALUE: an attribute of every span's resource, over service.name="+ServiceName+" and the others set here (repeat the flag or separate with commas)")
	fs.StringVar(&o.Filter, "startup-opentelemetry-filter", "info",
		"which spans are exported, in --startup-log-filter's syntax: every span here is an info event of "+logging.Target+", so all or none")
	fs.IntVar(&o.MaxBatchQueueSize, "opentelemetry-max-batch-queue-size", 2048, "spans queued for export; more are dropped")
	fs.IntVar(&o.MaxExportBatchSize, "opentelemetry-max-export-batch-size", 512, "the most spans one export sends")
	fs.IntVar(&o.MaxConcurrentExports, "opentelemetry-max-concurrent-exports", 1, "accepted for upstream's configurations: batches are exported one at a time")
	o.SchedDelay, o.MaxExportTimeout = 5*time.Second, 30*time.Second
	fs.Var(humanDuration{&o.SchedDelay}, "opentelemetry-sched-delay", "the longest a span waits for its batch to be exported (humantime, e.g. 5000ms)")
	fs.Var(humanDuration{&o.MaxExportTimeout}, "opentelemetry-max-export-timeout", "how long an export may take, retries included (humantime)")
	fs.StringVar(&o.SentryDSN, "sentry-dsn", "", "upstream's Sentry reporting: this operator does not report to Sentry (a warning says so); the controllers pass it on to environmentd, as upstream")
	fs.StringVar(&o.SentryEnvironment, "sentry-environment", "", "with --sentry-dsn, passed on to environmentd by the controllers, as upstream; not used here")
	fs.StringSliceVar(&o.SentryTags, "sentry-tag", nil, "upstream's Sentry tags: not supported, not used (upstream does not pass them on either)")
}

// Start turns tracing on when --opentelemetry-endpoint is set: the spans
// of this process (component: webhook or controllers) go to it in
// batches until stop, which exports what is left (within ctx) and turns
// tracing off.
func (o *Options) Start(log *zap.Logger, component string) (stop func(context.Context) error, err error) {
	stop = func(context.Context) error { return nil }
	if o.SentryDSN != "" || o.SentryEnvironment != "" || len(o.SentryTags) > 0 {
		log.Warn("this operator does not report to Sentry: --sentry-dsn, --sentry-environment and --sentry-tag are not used here " +
			"(the controllers pass --sentry-dsn and --sentry-environment on to environmentd, as upstream does); errors are logged, and traced with --opentelemetry-endpoint")
	}
	if o.malformedHeaders > 0 {
		return nil, fmt.Errorf("--opentelemetry-header: %d value(s) not a comma-separated list (not shown: a header may be a credential)", o.malformedHeaders)
	}
	headers, err := keyValues("--opentelemetry-header", o.Headers)
	if err != nil {
		return nil, err
	}
	attrs, err := keyValues("--opentelemetry-resource", o.Resource)
	if err != nil {
		return nil, err
	}
	level, err := logging.FilterLevel(o.Filter)
	if err != nil {
		return nil, fmt.Errorf("--startup-opentelemetry-filter: %w", err)
	}
	switch {
	case o.Endpoint == "":
		return stop, nil
	case level > zapcore.InfoLevel:
		log.Info("tracing off: --startup-opentelemetry-filter enables no info events of "+logging.Target, zap.String("filter", o.Filter))
		return stop, nil
	case o.MaxBatchQueueSize < 1 || o.MaxExportBatchSize < 1 || o.SchedDelay <= 0 || o.MaxExportTimeout <= 0:
		return nil, fmt.Errorf("--opentelemetry-max-batch-queue-size, --opentelemetry-max-export-batch-size, --opentelemetry-sched-delay and --opentelemetry-max-export-timeout must be positive")
	}
	h := http.Header{}
	for i, kv := range headers {
		// A header may hold a credential: neither part is quoted, the name
		// only when it is one (a value split at its '=' is not).
		if !httpguts.ValidHeaderFieldName(kv[0]) {
			return nil, fmt.Errorf("--opentelemetry-header: header %d has no valid name (its text is not shown: it may be a credential)", i+1)
		}
		if !httpguts.ValidHeaderFieldValue(kv[1]) {
			return nil, fmt.Errorf("--opentelemetry-header: the value of header %d (%s) is not a valid header value", i+1, kv[0])
		}
		h.Add(kv[0], kv[1])
	}
	c, err := newClient(o.Endpoint, o.Protocol, h)
	if err != nil {
		return nil, err
	}
	exporter, err := otlptrace.New(context.Background(), c)
	if err != nil {
		return nil, err
	}
	if o.MaxConcurrentExports != 1 {
		log.Info("--opentelemetry-max-concurrent-exports is ignored: batches are exported one at a time", zap.Int("value", o.MaxConcurrentExports))
	}
	// As upstream: service.name, then the user's attributes over it.
	res := []attribute.KeyValue{
		attribute.String("service.name", ServiceName),
		attribute.String("service.version", version.Get().Version),
		attribute.String("orchestratord.component", component),
	}
	if host, err := os.Hostname(); err == nil {
		res = append(res, attribute.String("service.instance.id", host)) // the pod's name
	}
	for _, kv := range attrs {
		res = append(res, attribute.String(kv[0], kv[1]))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter,
			sdktrace.WithMaxQueueSize(o.MaxBatchQueueSize),
			sdktrace.WithMaxExportBatchSize(min(o.MaxExportBatchSize, o.MaxBatchQueueSize)),
			sdktrace.WithBatchTimeout(o.SchedDelay),
			sdktrace.WithExportTimeout(o.MaxExportTimeout)),
		// Later attributes win over earlier ones of the same key.
		sdktrace.WithResource(resource.NewSchemaless(res...)),
		sdktrace.WithRawSpanLimits(SpanLimits()),
		// Every span, unless a caller's trace (the API server's) was not sampled.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	)
	otelLog := log.Named("opentelemetry")
	otel.SetLogger(zapr.NewLogger(otelLog))
	otel.SetErrorHandler(rateLimited(otelLog, time.Minute))
	restore := Use(tp)
	log.Info("tracing on", zap.String("endpoint", redacted(o.Endpoint)), zap.String("protocol", o.Protocol))
	return func(ctx context.Context) error {
		restore()
		return tp.Shutdown(ctx)
	}, nil
}

// keyValues splits upstream's NAME=VALUE arguments.
func keyValues(flag string, args []string) ([][2]string, error) {
	var out [][2]string
	for i, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			// Not quoted: a header's may be a credential.
			return nil, fmt.Errorf("%s: argument %d is not NAME=VALUE", flag, i+1)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// WithoutCredentials is endpoint without the user and password it may
// carry, "" when it does not parse (it may hold one all the same).
func WithoutCredentials(endpoint string) string {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil || u.Opaque != "":
		// "user:pw@host:4317" parses as the scheme "user" and an opaque
		// rest, the password in it.
		return ""
	case u.User == nil:
		return endpoint // as given, as upstream passes it
	}
	return withoutUser(u)
}

// redacted is the endpoint for messages: without a user, which may be a
// token, or a password.
func redacted(endpoint string) string {
	if u, err := url.Parse(endpoint); err == nil {
		return withoutUser(u)
	}
	return "(unparsable)"
}

func withoutUser(u *url.URL) string {
	if u.Opaque != "" {
		return "(not a URL with a host; not shown)"
	}
	shown := *u
	shown.User = nil
	return shown.String()
}

// rateLimited logs the exporter's errors (a collector away fails every
// batch, every few seconds) at most once per interval, with how many were
// not logged.
func rateLimited(log *zap.Logger, interval time.Duration) otel.ErrorHandler {
	var (
		mu         sync.Mutex
		last       time.Time
		suppressed int
	)
	return otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if now := time.Now(); now.Sub(last) >= interval {
			log.Warn("exporting spans failed", zap.Error(err), zap.Int("suppressed", suppressed))
			last, suppressed = now, 0
			return
		}
		suppressed++
	})
}

// humanDuration is a duration flag read as upstream reads it (humantime).
type humanDuration struct{ d *time.Duration }

func (h humanDuration) String() string {
	if h.d == nil {
		return ""
	}
	return humantime.Format(*h.d)
}

func (h humanDuration) Set(s string) error {
	d, err := humantime.Parse(s)
	if err != nil {
		return err
	}
	*h.d = d
	return nil
}

func (humanDuration) Type() string { return "duration" }

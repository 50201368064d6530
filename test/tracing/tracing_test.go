// Package tracing tests the spans both programs export, as a user would
// see them in a collector: a real rollout by the materialize reconciler
// against a real kube-apiserver and the environmentd stand-in, and real
// ConversionReviews, traced through upstream's flags to an in-process
// OTLP collector.
package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/cli"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
	"github.com/materializeinc/orchestratord/pkg/webhook"
	"github.com/materializeinc/orchestratord/test/controlplane"
	"github.com/materializeinc/orchestratord/test/fixture"
	"github.com/materializeinc/orchestratord/test/otlp"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	controlplane.Main(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c })
}

// logBuffer is the programs' stderr: zap writes a line at a time, from any
// goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines are the JSON log lines with message msg.
func (b *logBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if line["msg"] == msg {
			out = append(out, line)
		}
	}
	return out
}

// environmentd is the stand-in behind a recorder of the trace each request
// carries; it refuses the first promotion (503), which fails a reconcile.
type environmentd struct {
	*httptest.Server
	mu           sync.Mutex
	traceparents map[string][]string // by path
	refused      bool
}

func newEnvironmentd(t *testing.T) *environmentd {
	env := standin.New()
	env.SetAutoAdvance(true)
	e := &environmentd{traceparents: map[string][]string{}}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.traceparents[r.URL.Path] = append(e.traceparents[r.URL.Path], r.Header.Get("Traceparent"))
		refuse := !e.refused && strings.HasSuffix(r.URL.Path, mzenv.PromotePath)
		e.refused = e.refused || refuse
		e.mu.Unlock()
		if refuse {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		env.ServeHTTP(w, r)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *environmentd) traceparentsOf(suffix string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for path, tps := range e.traceparents {
		if strings.HasSuffix(path, suffix) {
			out = append(out, tps...)
		}
	}
	return out
}

// The API server's trace, as it sends a webhook a traceparent.
const (
	apiServerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	apiServerSpan  = "00f067aa0ba902b7"
)

func TestSpansOfAReconcileAndAConversion(t *testing.T) {
	collector := otlp.NewHTTP(t)
	// The flags as the programs parse them, upstream's names.
	var o cli.Observability
	fs := pflag.NewFlagSet("controllers", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--opentelemetry-endpoint=" + collector.URL, "--opentelemetry-protocol=http/protobuf",
		"--opentelemetry-resource=deployment.environment=test", "--opentelemetry-sched-delay=100ms"}); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	log, stop, err := o.Start(&logs, "controllers")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	// A rollout: the materialize reconciler, its leader API calls to the
	// stand-in (the first promotion refused).
	env := newEnvironmentd(t)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	mz := versioned.NewForConfigOrDie(cp.Config)
	ns, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "mz-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(ns.Name).Create(context.Background(), fixture.BackendSecret(ns.Name, "backend"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fixture.KeepStatefulSetsReady(t, kube, ns.Name)
	fixture.KeepBalancersReady(t, mz, ns.Name)
	kubeInformers, mzInformers := controller.NewInformers(kube, mz)
	c := materialize.New(controller.Deps{
		Kube: kube, MZ: mz, KubeInformers: kubeInformers, MZInformers: mzInformers,
		Recorder: record.NewFakeRecorder(1000), Log: log, Workers: 1,
	}, materialize.Options{
		EnvironmentdURL: func(_ *v1alpha1.Materialize, id string, gen uint64) string {
			return env.URL + "/mz" + id + "-environmentd-" + strconv.FormatUint(gen, 10) // the path is not in the span names
		},
		PollInterval: 100 * time.Millisecond, CreateBalancers: true, CreateConsoles: true,
	})
	ctx, cancel := context.WithCancel(context.Background())
	kubeInformers.Start(ctx.Done())
	mzInformers.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if _, err := mz.MaterializeV1alpha1().Materializes(ns.Name).Create(context.Background(), &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: ns.Name},
		Spec:       v1alpha1.MaterializeSpec{EnvironmentdImageRef: "materialize/environmentd:v26.1.0", BackendSecretName: "backend"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := mz.MaterializeV1alpha1().Materializes(ns.Name).Get(ctx, "prod", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		up := meta.FindStatusCondition(got.Status.Conditions, materialize.ConditionUpToDate)
		return got.Status.ActiveGeneration == 1 && up != nil && up.Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		t.Fatalf("the rollout: %v", err)
	}

	// Conversions, in the API server's trace: one converted, one refused.
	h := &webhook.ConvertHandler{Log: log, Metrics: webhook.NewMetrics(prometheus.NewRegistry())}
	for _, desired := range []string{"materialize.cloud/v1", "materialize.cloud/v9"} {
		req := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(fixture.ConversionReview(desired, 2)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", "00-"+apiServerTrace+"-"+apiServerSpan+"-01")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	cancel()
	<-done
	stop() // exports what is left

	spans := collector.Spans()
	byID := map[string]otlp.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}

	// Each reconcile is a span with the object's name.
	var reconciles int
	for _, s := range spans {
		if s.Name != "reconcile materialize" {
			continue
		}
		reconciles++
		if s.Attributes["controller"] != "materialize" || s.Attributes["namespace"] != ns.Name || s.Attributes["name"] != "prod" ||
			s.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
			t.Errorf("reconcile span %+v", s)
		}
		if s.Resource["service.name"] != "orchestratord" || s.Resource["orchestratord.component"] != "controllers" ||
			s.Resource["deployment.environment"] != "test" || s.Scope != "github.com/materializeinc/orchestratord" {
			t.Errorf("resource %v, scope %q", s.Resource, s.Scope)
		}
	}
	if reconciles < 2 {
		t.Errorf("%d reconcile spans, want the rollout's steps", reconciles)
	}

	// The leader API calls are children of their reconcile, and
	// environmentd is handed each call's own span.
	calls := map[string][]otlp.Span{}
	for _, s := range spans {
		if strings.Contains(s.Name, " /api/leader/") {
			calls[s.Name] = append(calls[s.Name], s)
			parent, ok := byID[s.ParentSpanID]
			if !ok || parent.Name != "reconcile materialize" || parent.TraceID != s.TraceID || s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
				t.Errorf("%s (parent %s) is not a client child of a reconcile: %+v", s.Name, s.ParentSpanID, s)
			}
		}
	}
	promotes := calls["POST "+mzenv.PromotePath]
	if len(calls["GET "+mzenv.StatusPath]) == 0 || len(promotes) != 2 {
		t.Fatalf("leader API spans %v, want status calls and two promotions", calls)
	}
	refused, promoted := promotes[0], promotes[1]
	if refused.Attributes["http.response.status_code"] != "503" || refused.StatusCode != tracepb.Status_STATUS_CODE_ERROR ||
		promoted.Attributes["http.response.status_code"] != "200" || promoted.StatusCode == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("promotions %+v then %+v", refused, promoted)
	}
	tps := env.traceparentsOf(mzenv.PromotePath)
	if len(tps) != 2 || tps[0] != "00-"+refused.TraceID+"-"+refused.SpanID+"-01" || tps[1] != "00-"+promoted.TraceID+"-"+promoted.SpanID+"-01" {
		t.Errorf("environmentd got traceparents %q for promotions %s/%s, %s/%s", tps, refused.TraceID, refused.SpanID, promoted.TraceID, promoted.SpanID)
	}

	// The failed reconcile: its span marked, its log line leads to it.
	failed := byID[refused.ParentSpanID]
	if failed.StatusCode != tracepb.Status_STATUS_CODE_ERROR || !strings.Contains(failed.StatusMessage, "503") {
		t.Errorf("the reconcile whose promotion was refused: %+v", failed)
	}
	lines := logs.lines(t, "reconcile failed; retrying with backoff")
	if len(lines) != 1 || lines[0]["trace_id"] != failed.TraceID || lines[0]["span_id"] != failed.SpanID {
		t.Errorf("reconcile failure lines %v, want one with trace_id %s span_id %s", lines, failed.TraceID, failed.SpanID)
	}

	// Each review is a server span in the API server's trace.
	var reviews []otlp.Span
	for _, s := range spans {
		if s.Name == "ConversionReview" {
			reviews = append(reviews, s)
		}
	}
	if len(reviews) != 2 {
		t.Fatalf("%d review spans, want 2", len(reviews))
	}
	for _, s := range reviews {
		if s.TraceID != apiServerTrace || s.ParentSpanID != apiServerSpan || s.Kind != tracepb.Span_SPAN_KIND_SERVER ||
			s.Attributes["uid"] != "bench" || s.Attributes["objects"] != "2" {
			t.Errorf("review span %+v", s)
		}
	}
	converted, refusedReview := reviews[0], reviews[1]
	if converted.Attributes["result"] != "success" || converted.Attributes["desiredAPIVersion"] != "materialize.cloud/v1" ||
		refusedReview.Attributes["result"] != "failure" || refusedReview.StatusCode != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("reviews %+v, %+v", converted, refusedReview)
	}
	lines = logs.lines(t, "conversion failed")
	if len(lines) != 1 || lines[0]["trace_id"] != apiServerTrace || lines[0]["span_id"] != refusedReview.SpanID {
		t.Errorf("conversion failure lines %v, want one with trace_id %s span_id %s", lines, apiServerTrace, refusedReview.SpanID)
	}
}

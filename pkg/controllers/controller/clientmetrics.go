package controller

import (
	"context"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
)

// RegisterClientMetrics makes client-go report its work queues and REST
// requests to reg, under the names operators know from controller-runtime
// (workqueue_*, rest_client_*). client-go takes one provider per process,
// so only the first call registers; later calls do nothing.
func RegisterClientMetrics(reg prometheus.Registerer) {
	registerOnce.Do(func() {
		q := newQueueMetrics(reg)
		workqueue.SetProvider(q)
		queueProvider.Store(q)
		rc := newRESTMetrics(reg)
		metrics.Register(metrics.RegisterOpts{
			RequestLatency:     rc.latency,
			RequestResult:      rc.result,
			RateLimiterLatency: rc.limiter,
		})
	})
}

var (
	registerOnce  sync.Once
	queueProvider atomic.Pointer[queueMetrics]
)

// queueStopped zeroes the gauges of the work queue name once a term's
// queue has shut down. client-go stops updating them then, so a standby
// would show the last term's work in progress for ever, and the
// stuck-worker alert (docs/monitoring.md) would fire on it.
func queueStopped(name string) {
	if m := queueProvider.Load(); m != nil {
		m.depth.WithLabelValues(name).Set(0)
		m.unfinished.WithLabelValues(name).Set(0)
		m.longestRunning.WithLabelValues(name).Set(0)
	}
}

// queueMetrics is a workqueue.MetricsProvider; every queue is labelled by
// its name (the controller's).
type queueMetrics struct {
	depth, adds, retries       *prometheus.GaugeVec
	addsTotal, retriesTotal    *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
	unfinished, longestRunning *prometheus.GaugeVec
}

func newQueueMetrics(reg prometheus.Registerer) *queueMetrics {
	buckets := prometheus.ExponentialBuckets(1e-5, 10, 10)
	m := &queueMetrics{
		depth:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "Current depth of the work queue."}, []string{"name"}),
		addsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Adds handled by the work queue."}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_queue_duration_seconds",
			Help: "Time an item waits in the work queue before it is processed.", Buckets: buckets}, []string{"name"}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_work_duration_seconds",
			Help: "Time processing an item from the work queue takes.", Buckets: buckets}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_unfinished_work_seconds",
			Help: "Seconds of work in progress that has not been observed by work_duration; large values mean stuck workers."}, []string{"name"}),
		longestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_longest_running_processor_seconds",
			Help: "Seconds the longest running processor of the work queue has been running."}, []string{"name"}),
		retriesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total", Help: "Retries handled by the work queue."}, []string{"name"}),
	}
	reg.MustRegister(m.depth, m.addsTotal, m.latency, m.workDuration, m.unfinished, m.longestRunning, m.retriesTotal)
	return m
}

func (m *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name)
}
func (m *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.addsTotal.WithLabelValues(name)
}
func (m *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(name)
}
func (m *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.workDuration.WithLabelValues(name)
}
func (m *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name)
}
func (m *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longestRunning.WithLabelValues(name)
}
func (m *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retriesTotal.WithLabelValues(name)
}

// restMetrics adapts client-go's REST client hooks. Labels are the verb,
// the API server's host and the response code: never the URL path, which
// names objects and would make a series per object.
type restMetrics struct {
	latency, limiter latencyMetric
	result           resultMetric
}

func newRESTMetrics(reg prometheus.Registerer) restMetrics {
	buckets := []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_request_duration_seconds",
		Help: "Latency of API server requests by verb and host.", Buckets: buckets}, []string{"verb", "host"})
	limiter := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_rate_limiter_duration_seconds",
		Help: "Time requests waited for the client-side rate limiter, by verb and host.", Buckets: buckets}, []string{"verb", "host"})
	result := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rest_client_requests_total",
		Help: "API server requests by status code, method and host."}, []string{"code", "method", "host"})
	reg.MustRegister(latency, limiter, result)
	return restMetrics{latency: latencyMetric{latency}, limiter: latencyMetric{limiter}, result: resultMetric{result}}
}

type latencyMetric struct{ v *prometheus.HistogramVec }

func (l latencyMetric) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	l.v.WithLabelValues(verb, u.Host).Observe(d.Seconds())
}

type resultMetric struct{ v *prometheus.CounterVec }

func (r resultMetric) Increment(_ context.Context, code, method, host string) {
	r.v.WithLabelValues(code, method, host).Inc()
}

package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Metrics count reconciles per controller.
type Metrics struct {
	reconciles *prometheus.CounterVec
	duration   *prometheus.HistogramVec
}

// NewMetrics registers reconcile metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "orchestratord", Name: "reconciles_total", Help: "Reconciles by controller and result.",
		}, []string{"controller", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "orchestratord", Name: "reconcile_duration_seconds", Help: "Time per reconcile.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"controller"}),
	}
	reg.MustRegister(m.reconciles, m.duration)
	return m
}

func (m *Metrics) observe(controller string, err error, d time.Duration) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.reconciles.WithLabelValues(controller, result).Inc()
	m.duration.WithLabelValues(controller).Observe(d.Seconds())
}

// newBucket bounds the overall retry rate so a broken API server is not
// hammered: 50 per second, bursts of 300.
func newBucket() *rate.Limiter { return rate.NewLimiter(rate.Limit(50), 300) }

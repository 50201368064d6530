package webhook

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the conversion webhook's Prometheus metrics.
type Metrics struct {
	conversions       *prometheus.CounterVec
	latency           *prometheus.HistogramVec
	inFlight          prometheus.Gauge
	inFlightMemory    prometheus.Gauge
	objects           prometheus.Histogram
	bytes             prometheus.Histogram
	carry             *prometheus.CounterVec
	connectionsClosed *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		conversions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "orchestratord", Subsystem: "webhook", Name: "conversions_total",
			Help: "Objects converted, by result and version pair.",
		}, []string{"result", "from", "to"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "orchestratord", Subsystem: "webhook", Name: "conversion_review_duration_seconds",
			Help:    "Time to answer one ConversionReview, from the body read to the response written.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"result"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "orchestratord", Subsystem: "webhook", Name: "conversion_reviews_in_flight",
			Help: "ConversionReviews being answered now.",
		}),
		inFlightMemory: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "orchestratord", Subsystem: "webhook", Name: "in_flight_memory_bytes",
			Help: "Heap charged to the reviews being read and answered now (bodies as they arrive, then their estimated decoded cost), against --max-in-flight-memory.",
		}),
		objects: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "orchestratord", Subsystem: "webhook", Name: "conversion_review_objects",
			Help:    "Objects per ConversionReview (1 for a get, up to a page for a list).",
			Buckets: []float64{1, 2, 5, 10, 50, 100, 250, 500, 1000},
		}),
		// Sizes the request limit from what the API server really sends.
		bytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "orchestratord", Subsystem: "webhook", Name: "conversion_review_bytes",
			Help:    "Body size of each ConversionReview admitted and read.",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 10), // 1 KiB .. 256 MiB
		}),
		carry: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "orchestratord", Subsystem: "webhook", Name: "carry_annotations_ignored_total",
			Help: "Carry annotations not trusted (tampered or malformed), by annotation.",
		}, []string{"annotation"}),
		connectionsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "orchestratord", Subsystem: "webhook", Name: "connections_closed_total",
			Help: "HTTPS connections closed at --max-connections: evicted (the oldest without a request, for a new one) or refused (every one busy).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.connectionsClosed, m.conversions, m.latency, m.inFlight, m.inFlightMemory, m.objects, m.bytes, m.carry)
	return m
}

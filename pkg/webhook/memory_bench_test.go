package webhook

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/materializeinc/orchestratord/test/hostile"
)

// go test -run '^$' -bench ReviewPeakHeap -benchtime 3x ./pkg/webhook
//
// The live heap a review costs at its peak over its body's size, for each
// shape: the collector runs back to back while one review is answered and
// the largest live heap it marks is kept. The worst shape's figure is
// decodedCostFactor, by which admission charges a review.
func BenchmarkReviewPeakHeap(b *testing.B) {
	for name, body := range hostile.Reviews(4 << 20) {
		b.Run(name, func(b *testing.B) {
			h := &ConvertHandler{Log: zap.NewNop(), Metrics: NewMetrics(prometheus.NewRegistry()), MaxInFlightMemory: 1 << 40}
			var worst float64
			for b.Loop() {
				peak := peakLiveHeap(func() {
					if err := serveTo(h, body); err != nil {
						b.Fatal(err)
					}
				})
				worst = max(worst, float64(peak)/float64(len(body)))
			}
			b.ReportMetric(worst, "peak-heap/body")
			cost, _ := reviewCost(body)
			b.ReportMetric(float64(cost+int64(len(body))+1)/float64(len(body)), "charged/body")
			b.ReportMetric(float64(len(body)), "body-bytes")
		})
	}
}

// peakLiveHeap runs f while collecting back to back, and returns the
// largest live heap a collection found above what was live before f.
func peakLiveHeap(f func()) uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	live := func() uint64 {
		runtime.GC()
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := live()
	var done atomic.Bool
	peaks := make(chan uint64)
	go func() {
		var peak uint64
		for !done.Load() {
			peak = max(peak, live())
		}
		peaks <- peak
	}()
	f()
	done.Store(true)
	peak := <-peaks
	if peak < base {
		return 0
	}
	return peak - base
}

// What admission charges a review (its body buffer and reviewCost) is at
// least the live heap it peaks at, for every shape: the budget holds.
func TestChargeBoundsThePeakHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("collects back to back for a few seconds")
	}
	for name, body := range hostile.Reviews(1 << 20) {
		h := &ConvertHandler{Log: zap.NewNop(), Metrics: NewMetrics(prometheus.NewRegistry()), MaxInFlightMemory: 1 << 40}
		// Anything else the process allocates meanwhile only adds to a
		// sample: the least of three peaks is the review's.
		var peak uint64
		for i := range 3 {
			p := peakLiveHeap(func() {
				if err := serveTo(h, body); err != nil {
					t.Fatal(name, err)
				}
			})
			if i == 0 || p < peak {
				peak = p
			}
		}
		h.budget.mu.Lock()
		charged := h.budget.peak
		h.budget.mu.Unlock()
		t.Logf("%-22s body %8d  peak %9d  charged %9d (%.2f)", name, len(body), peak, charged, float64(charged)/float64(peak))
		if uint64(charged) < peak {
			t.Errorf("%s: charged %d, below the peak heap %d", name, charged, peak)
		}
	}
}

// tailWriter is a ResponseWriter that keeps only the end of the answer, as
// a connection does: a recorder would add a copy of the answer to the heap
// being measured.
type tailWriter struct {
	header http.Header
	code   int
	tail   []byte
}

func (w *tailWriter) Header() http.Header { return w.header }
func (w *tailWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *tailWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.tail = append(w.tail, p[max(0, len(p)-256):]...)
	w.tail = w.tail[max(0, len(w.tail)-256):]
	return len(p), nil
}

// serveTo answers one review of body and says why it was not a success.
func serveTo(h http.Handler, body string) error {
	w := &tailWriter{header: http.Header{}}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))
	if w.code != http.StatusOK || !strings.HasSuffix(string(w.tail), `"status":"Success"}}}`) {
		return fmt.Errorf("answered %d: ...%s", w.code, w.tail)
	}
	return nil
}

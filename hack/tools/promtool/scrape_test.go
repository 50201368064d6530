package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A target whose counters grow between scrapes: the first rules evaluate
// (a rate, a histogram quantile) and fire on what was scraped; the second
// fails on the scraped label sets, which a unit test's series would not
// have shown.
func TestScrapeEval(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i := n.Add(1)
		fmt.Fprintf(w, `# TYPE requests_total counter
requests_total{code="200"} %d
requests_total{code="500"} %d
# TYPE latency_seconds histogram
latency_seconds_bucket{le="0.1"} 0
latency_seconds_bucket{le="10"} %d
latency_seconds_bucket{le="+Inf"} %d
latency_seconds_sum %d
latency_seconds_count %d
`, 10*i, i, 5*i, 5*i, 25*i, 5*i)
	}))
	defer srv.Close()
	var out strings.Builder
	if err := scrapeEval(&out, "testdata/scrape_ok.yaml", "ops", []string{"p-0=" + srv.URL}, 3, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Errors: 1 series, watching 1, firing [", "Slow: 1 series, watching 1, firing ["} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	err := scrapeEval(io.Discard, "testdata/scrape_bad.yaml", "ops", []string{"p-0=" + srv.URL}, 2, 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "alert Ratio") {
		t.Errorf("an expression failing on the scraped series: %v", err)
	}
}

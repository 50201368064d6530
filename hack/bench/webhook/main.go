// Command webhook-bench measures the conversion webhook against two
// references, in one run: an echo handler that only decodes the
// ConversionReview and encodes the objects back unchanged (what any handler
// pays), and controller-runtime's conversion webhook with hub/spoke Go types
// (peer.go; what a Go operator author would otherwise ship). Reviews of 1
// and of 500 v1alpha1 Materializes converted to v1, called in process and
// over TLS (HTTP/2), each repeated; ratios are throughput over the echo's.
//
// It is its own module so that the operator does not depend on
// controller-runtime:
//
//	cd hack/bench/webhook && go run . -duration 5s -repeats 3
//
// With -guard it also compares its in-process cost relative to the echo
// (echo rate over orchestratord's, per size; the median round) with the
// summary recorded in docs/benchmarks.md and fails when it rose by more than
// 25 %, a throughput ratio down by more than 20 %: ratios of two handlers
// measured back to back, so a slower or busier machine moves both.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/hack/bench/guard"
	"github.com/materializeinc/orchestratord/pkg/servingcert"
	"github.com/materializeinc/orchestratord/pkg/webhook"
	"github.com/materializeinc/orchestratord/test/fixture"
)

func main() {
	duration := flag.Duration("duration", 5*time.Second, "TLS load time per handler and size")
	concurrency := flag.Int("concurrency", 4, "concurrent TLS clients")
	repeats := flag.Int("repeats", 3, "rounds; each round measures every handler once")
	sizes := flag.String("objects", "1,500", "objects per review, comma separated")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	paths := flag.String("paths", "in process,TLS", "how handlers are called, comma separated: in process, TLS")
	benchtime := flag.Duration("benchtime", time.Second, "in-process run time per handler and size")
	guardDoc := flag.String("guard", "", "compare the in-process cost relative to the echo with the summary recorded in this file (docs/benchmarks.md); fail when it rose by more than 25% (throughput ratio down by more than 20%)")
	record := flag.Bool("record", false, "with -guard: write this run's summary into the file instead")
	testing.Init()
	flag.Parse()
	// testing.Benchmark reads its run time from the test flags.
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-bench:", err)
		os.Exit(2)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "webhook-bench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "webhook-bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	figures, err := run(*duration, *concurrency, *repeats, *sizes, strings.Split(*paths, ","))
	if err == nil && *guardDoc != "" && len(figures) == 0 {
		err = fmt.Errorf("-guard compares in-process figures: -paths must include \"in process\"")
	}
	if err == nil && *guardDoc != "" {
		const name = "webhook in process"
		fmt.Println("\n" + guard.Line(name, figures))
		err = guard.Check(*guardDoc, name, figures, 0.25, 0.01, *record, os.Stdout)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "webhook-bench:", err)
		os.Exit(1)
	}
}

// echo is the baseline: the same JSON work a handler cannot avoid, no conversion.
func echo(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	review.Response = &apiextensionsv1.ConversionResponse{
		UID: review.Request.UID, ConvertedObjects: review.Request.Objects,
		Result: metav1.Status{Status: metav1.StatusSuccess},
	}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// handlers are measured in turn, the order rotating by round; ratios are
// over the echo's rate in the same round.
var handlerNames = []string{"echo", "orchestratord", "controller-runtime"}

// run prints the table and returns the guard's figures: per size, the
// median round's echo rate over orchestratord's, in process.
func run(duration time.Duration, concurrency, repeats int, sizes string, paths []string) (map[string]float64, error) {
	peer, err := peerHandler()
	if err != nil {
		return nil, err
	}
	handlers := map[string]http.Handler{
		"echo":               http.HandlerFunc(echo),
		"orchestratord":      &webhook.ConvertHandler{Log: zap.NewNop(), Metrics: webhook.NewMetrics(prometheus.NewRegistry())},
		"controller-runtime": peer,
	}
	for _, name := range handlerNames[1:] {
		if err := checkConverts(handlers[name]); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	ca, err := servingcert.NewCA("bench", time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	leaf, err := ca.IssueServing([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	for name, h := range handlers {
		mux.Handle("/"+name, h)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, TLSConfig: webhook.TLSConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return leaf, nil })}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	defer srv.Close()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: concurrency, ForceAttemptHTTP2: true,
	}}
	base := "https://" + ln.Addr().String()

	fmt.Printf("go %s, %d CPUs; in process: one caller; TLS: %d concurrent clients for %s per handler; %d rounds\n\n",
		runtime.Version(), runtime.NumCPU(), concurrency, duration, repeats)
	fmt.Println("| objects/review | path | echo objects/s | orchestratord objects/s (× echo) | controller-runtime objects/s (× echo) | orchestratord / controller-runtime |")
	fmt.Println("|---:|---|---:|---:|---:|---:|")
	figures := map[string]float64{}
	for _, field := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil {
			return nil, fmt.Errorf("-objects: %w", err)
		}
		body := fixture.ConversionReview("materialize.cloud/v1", n)
		for _, path := range paths {
			path = strings.TrimSpace(path)
			if path != "in process" && path != "TLS" {
				return nil, fmt.Errorf("-paths: %q is neither \"in process\" nor \"TLS\"", path)
			}
			rates := map[string][]float64{}
			for round := range repeats {
				// Each round starts with another handler, and each starts
				// with a collected heap: none pays for another's garbage
				// or always runs first.
				for i := range handlerNames {
					name := handlerNames[(i+round)%len(handlerNames)]
					runtime.GC()
					var rate float64
					if path == "in process" {
						rate, err = inProcess(handlers[name], body)
					} else {
						var r result
						r, err = load(client, base+"/"+name, body, duration, concurrency)
						rate = r.rate
					}
					if err != nil {
						return nil, fmt.Errorf("%s, %d objects, %s: %w", name, n, path, err)
					}
					rates[name] = append(rates[name], rate*float64(n))
				}
			}
			fmt.Printf("| %d | %s | %s | %s (%s) | %s (%s) | %s |\n", n, path,
				span(rates["echo"], 1, "%.0f"),
				span(rates["orchestratord"], 1, "%.0f"), ratios(rates["orchestratord"], rates["echo"]),
				span(rates["controller-runtime"], 1, "%.0f"), ratios(rates["controller-runtime"], rates["echo"]),
				ratios(rates["orchestratord"], rates["controller-runtime"]))
			if path == "in process" {
				figures[fmt.Sprintf("echo_over_orchestratord_%d", n)] = medianRatio(rates["echo"], rates["orchestratord"])
			}
		}
	}
	return figures, nil
}

// medianRatio is the median of the rounds' ratios a[i]/b[i].
func medianRatio(a, b []float64) float64 {
	rs := roundRatios(a, b)
	slices.Sort(rs)
	if len(rs)%2 == 1 {
		return rs[len(rs)/2]
	}
	return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
}

// checkConverts makes sure a handler does the work measured: a v1 object
// with its rollout hash back for the fixture.
func checkConverts(h http.Handler) error {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(fixture.ConversionReview("materialize.cloud/v1", 1))))
	var out struct {
		Response struct {
			ConvertedObjects []struct {
				APIVersion string `json:"apiVersion"`
				Status     struct {
					RequestedRolloutHash string `json:"requestedRolloutHash"`
				} `json:"status"`
			} `json:"convertedObjects"`
		} `json:"response"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		return fmt.Errorf("response: %w: %s", err, rec.Body)
	}
	if objs := out.Response.ConvertedObjects; len(objs) != 1 || objs[0].APIVersion != "materialize.cloud/v1" || objs[0].Status.RequestedRolloutHash == "" {
		return fmt.Errorf("did not convert the fixture to v1 with a rollout hash: %s", rec.Body)
	}
	return nil
}

// inProcess is reviews per second of h called directly, as a benchmark.
// Answers go to a writer that keeps nothing, as a connection's buffered
// writer would: httptest's recorder grows one buffer, which charges a
// handler that writes its answer in parts (orchestratord's, for a large
// review) for copies a server never makes.
func inProcess(h http.Handler, body []byte) (float64, error) {
	var failure error
	r := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			w := &discardingWriter{header: http.Header{}}
			req := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(w, req)
			if w.code != http.StatusOK || !w.succeeded {
				failure = fmt.Errorf("status %d, success not reported", w.code)
				b.SkipNow()
			}
		}
	})
	if failure != nil {
		return 0, failure
	}
	return float64(r.N) / r.T.Seconds(), nil
}

// success is what every successful answer holds.
var success = []byte(`"status":"Success"`)

// discardingWriter is an http.ResponseWriter that keeps only whether the
// answer held success, across writes.
type discardingWriter struct {
	header    http.Header
	code      int
	tail      []byte // the last bytes written, shorter than success
	succeeded bool
}

func (w *discardingWriter) Header() http.Header { return w.header }

func (w *discardingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *discardingWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if !w.succeeded {
		// A match may straddle two writes: look at the tail and p's head.
		head := p[:min(len(p), len(success)-1)]
		joined := append(append([]byte(nil), w.tail...), head...)
		w.succeeded = bytes.Contains(joined, success) || bytes.Contains(p, success)
		if len(p) >= len(success)-1 {
			w.tail = append(w.tail[:0], p[len(p)-len(success)+1:]...)
		} else {
			w.tail = append(w.tail, p...)
			w.tail = w.tail[max(0, len(w.tail)-len(success)+1):]
		}
	}
	return len(p), nil
}

// span is the range of xs (each times scale) as "lo–hi".
func span(xs []float64, scale float64, format string) string {
	lo, hi := slices.Min(xs)*scale, slices.Max(xs)*scale
	if fmt.Sprintf(format, lo) == fmt.Sprintf(format, hi) {
		return fmt.Sprintf(format, lo)
	}
	return fmt.Sprintf(format+"–"+format, lo, hi)
}

// ratios is the range of the rounds' ratios a[i]/b[i].
func ratios(a, b []float64) string { return span(roundRatios(a, b), 1, "%.2f") }

// roundRatios are a[i]/b[i]: each round's two measurements ran back to
// back, so their ratio is the round's.
func roundRatios(a, b []float64) []float64 {
	rs := make([]float64, len(a))
	for i := range a {
		rs[i] = a[i] / b[i]
	}
	return rs
}

type result struct {
	rate     float64
	p50, p99 time.Duration
}

func load(client *http.Client, url string, body []byte, duration time.Duration, concurrency int) (result, error) {
	// Warm the connections and caches first.
	for range concurrency {
		if _, err := post(client, url, body); err != nil {
			return result{}, err
		}
	}
	deadline := time.Now().Add(duration)
	var mu sync.Mutex
	var latencies []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) {
				d, err := post(client, url, body)
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				mine = append(mine, d)
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return result{}, firstErr
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) time.Duration {
		return latencies[int(p*float64(len(latencies)-1))].Round(time.Microsecond)
	}
	return result{rate: float64(len(latencies)) / elapsed.Seconds(), p50: pct(0.50), p99: pct(0.99)}, nil
}

func post(client *http.Client, url string, body []byte) (time.Duration, error) {
	start := time.Now()
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"status":"Success"`)) {
		return 0, fmt.Errorf("%s: %d %s", url, resp.StatusCode, out)
	}
	return time.Since(start), nil
}

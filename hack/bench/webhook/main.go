// Command webhook-bench measures the conversion webhook over TLS: reviews of
// 1 and of 500 Materialize objects sent to the real /convert handler and, on
// the same TLS server, to an echo handler that only decodes the
// ConversionReview and encodes the objects back unchanged. The ratio of the
// two isolates what conversion itself costs on top of the transport.
//
//	go run ./hack/bench/webhook -duration 10s -concurrency 4
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
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/servingcert"
	"github.com/materializeinc/orchestratord/pkg/webhook"
	"github.com/materializeinc/orchestratord/test/fixture"
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "load time per scenario")
	concurrency := flag.Int("concurrency", 4, "concurrent clients")
	sizes := flag.String("objects", "1,500", "objects per review, comma separated")
	flag.Parse()
	if err := run(*duration, *concurrency, *sizes); err != nil {
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

func run(duration time.Duration, concurrency int, sizes string) error {
	ca, err := servingcert.NewCA("bench", time.Hour, time.Now())
	if err != nil {
		return err
	}
	leaf, err := ca.IssueServing([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour, time.Now())
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/convert", &webhook.ConvertHandler{Log: zap.NewNop(), Metrics: webhook.NewMetrics(prometheus.NewRegistry())})
	mux.HandleFunc("/echo", echo)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
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

	fmt.Printf("go %s, %d CPUs, concurrency %d, %s per scenario; client and server share the machine\n\n",
		runtime.Version(), runtime.NumCPU(), concurrency, duration)
	fmt.Println("| objects/review | handler | reviews/s | objects/s | p50 | p99 |")
	fmt.Println("|---:|---|---:|---:|---:|---:|")
	var ratios []string
	for _, field := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil {
			return fmt.Errorf("-objects: %w", err)
		}
		body := reviewBody(n)
		results := map[string]result{}
		for _, path := range []string{"/echo", "/convert"} {
			r, err := load(client, base+path, body, duration, concurrency)
			if err != nil {
				return err
			}
			results[path] = r
			fmt.Printf("| %d | %s | %.0f | %.0f | %s | %s |\n", n, strings.TrimPrefix(path, "/"), r.rate, r.rate*float64(n), r.p50, r.p99)
		}
		ratios = append(ratios, fmt.Sprintf("%d objects: convert/echo throughput %.2f, p99 %.2fx",
			n, results["/convert"].rate/results["/echo"].rate, float64(results["/convert"].p99)/float64(results["/echo"].p99)))
	}
	fmt.Println()
	for _, r := range ratios {
		fmt.Println("- " + r)
	}
	return nil
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

// reviewBody is a v1alpha1 -> v1 review of n realistic, whole objects.
func reviewBody(n int) []byte {
	objects := make([]json.RawMessage, n)
	for i := range objects {
		objects[i] = fixture.V1alpha1Materialize(i)
	}
	review := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
		"request": map[string]any{"uid": "bench", "desiredAPIVersion": "materialize.cloud/v1", "objects": objects},
	}
	body, _ := json.Marshal(review)
	return body
}

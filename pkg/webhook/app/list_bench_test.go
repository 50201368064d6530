package app_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/test/fixture"
	"github.com/materializeinc/orchestratord/test/program"
)

// A LIST of 500 Materializes through the real API server, at the storage
// version (v1alpha1: no conversion) and at v1 (the webhook converts), as a
// user's kubectl or informer would send it, then reviews of 500 sent to the
// webhook process directly; each reports the process's RSS and heap:
//
//	go test -run '^$' -bench ListThroughTheAPIServer -benchtime 20x ./pkg/webhook/app
//
// It reports the objects the webhook converted per LIST, which says whether
// the API server called it at all: it serves a LIST from its watch cache of
// that version, which converted each object once, when it changed. (A GET
// reads etcd and converts every time: test/cluster's readers.)
func BenchmarkListThroughTheAPIServer(b *testing.B) {
	const n = 500
	ns := newNamespace(b)
	hook := startWebhook(b, ns)
	pointCRDAt(b, "https://"+hook.https+"/convert")
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	mz := versioned.NewForConfigOrDie(cfg)
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		var obj v1alpha1.Materialize
		if err := json.Unmarshal(fixture.V1alpha1Materialize(i), &obj); err != nil {
			b.Fatal(err)
		}
		obj.ObjectMeta = metav1.ObjectMeta{Name: obj.Name, Namespace: ns, Labels: obj.Labels, Annotations: obj.Annotations}
		obj.Status = v1alpha1.MaterializeStatus{}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := mz.MaterializeV1alpha1().Materializes(ns).Create(ctx, &obj, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}

	// The -exact cases ask for the latest resourceVersion exactly, which
	// an older API server read from etcd (converting every object); the
	// watch cache serves that too now.
	for _, version := range []string{"v1alpha1", "v1", "v1alpha1-exact", "v1-exact"} {
		b.Run(version, func(b *testing.B) {
			opts := metav1.ListOptions{}
			if strings.HasSuffix(version, "-exact") {
				latest, err := mz.MaterializeV1alpha1().Materializes(ns).List(ctx, metav1.ListOptions{Limit: 1})
				if err != nil {
					b.Fatal(err)
				}
				opts = metav1.ListOptions{ResourceVersion: latest.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact}
			}
			converted := metric(b, hook.metrics, "orchestratord_webhook_conversion_review_objects_sum")
			for b.Loop() {
				var count int
				switch strings.TrimSuffix(version, "-exact") {
				case "v1alpha1":
					list, err := mz.MaterializeV1alpha1().Materializes(ns).List(ctx, opts)
					if err != nil {
						b.Fatal(err)
					}
					count = len(list.Items)
				default:
					list, err := mz.MaterializeV1().Materializes(ns).List(ctx, opts)
					if err != nil {
						b.Fatal(err)
					}
					count = len(list.Items)
				}
				if count != n {
					b.Fatalf("listed %d, want %d", count, n)
				}
			}
			b.ReportMetric((metric(b, hook.metrics, "orchestratord_webhook_conversion_review_objects_sum")-converted)/float64(b.N), "converted/op")
			// The webhook process, after the LISTs and the 500 creates.
			b.ReportMetric(metric(b, hook.metrics, "process_resident_memory_bytes")/(1<<20), "webhook-RSS-MiB")
			b.ReportMetric(metric(b, hook.metrics, "go_memstats_heap_inuse_bytes")/(1<<20), "webhook-heap-MiB")
		})
	}
	b.Run("reviews-of-500-straight-to-the-webhook", func(b *testing.B) { benchReviews(b, hook) })
}

// benchReviews sends reviews of 500 objects straight to the webhook
// process, 4 at a time (a LIST at v1 reaches it only when the API server's
// cache converts), and reports the process's memory under that load.
func benchReviews(b *testing.B, hook *webhookProcess) {
	body := fixture.ConversionReview("materialize.cloud/v1", 500)
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // measuring, not trusting
		ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 4,
	}}
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				resp, err := client.Post("https://"+hook.https+"/convert", "application/json", bytes.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				out, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"status":"Success"`)) {
					errs <- fmt.Errorf("%d: %.200s", resp.StatusCode, out)
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(metric(b, hook.metrics, "process_resident_memory_bytes")/(1<<20), "webhook-RSS-MiB")
	b.ReportMetric(metric(b, hook.metrics, "go_memstats_heap_inuse_bytes")/(1<<20), "webhook-heap-MiB")
}

// metric is the value of a series the webhook exports.
func metric(b *testing.B, metrics, series string) float64 {
	v, err := program.Metric(metrics, series)
	if err != nil {
		b.Fatal(err)
	}
	return v
}

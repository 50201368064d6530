package environmentd

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/test/standin/clap"
)

// environmentd reads a replica process's CPU and memory from the resource
// metrics API and its heap from clusterd, by the Service's internal-http
// port; a refused read is a warning, never fatal, as upstream.
func TestFetchServiceMetricsReadsTheMetricsAPIAndClusterd(t *testing.T) {
	var metricsStatus = http.StatusOK
	var mu sync.Mutex
	var paths []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/mzx-cluster-u1-replica-u1-gen-2-0":
			w.WriteHeader(metricsStatus)
			if metricsStatus != http.StatusOK {
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden","reason":"Forbidden","code":403}`))
				return
			}
			_, _ = w.Write([]byte(`{"kind":"PodMetrics","containers":[{"name":"clusterd","usage":{"cpu":"1500u","memory":"2Mi"}}]}`))
		case "/api/v1/namespaces/ns/services/mzx-cluster-u1-replica-u1-gen-2":
			_, _ = w.Write([]byte(`{"kind":"Service","apiVersion":"v1","metadata":{"name":"mzx-cluster-u1-replica-u1-gen-2","namespace":"ns"},
				"spec":{"ports":[{"name":"computectl","port":2101},{"name":"internal-http","port":6878}]}}`))
		case "/api/usage-metrics":
			if r.Host != "mzx-cluster-u1-replica-u1-gen-2-0.mzx-cluster-u1-replica-u1-gen-2.ns.svc.cluster.local:6878" {
				t.Errorf("clusterd usage asked of %s, want the process's DNS name and internal-http port", r.Host)
			}
			_, _ = w.Write([]byte(`{"disk_bytes":null,"memory_bytes":1000,"swap_bytes":24,"heap_limit":4096}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	// Every name resolves to the test server: clusterd's DNS name included.
	toAPI := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, api.Listener.Addr().String())
	}}}
	args := &clap.Matches{Values: map[string][]string{}}
	o := &Orchestrator{Kube: kube, Namespace: "ns", Prefix: "mzx-", Args: args, HTTP: toAPI}
	name := o.name(Replica{ClusterID: "u1", ReplicaID: "u1"}.ServiceID(2))
	var warnings []string
	warn := func(msg string) { warnings = append(warnings, msg) }

	got := o.FetchServiceMetrics(context.Background(), name, 1, warn)
	if len(warnings) > 0 {
		t.Fatalf("warnings: %q", warnings)
	}
	m := got[0]
	if m.CPUNanoCores == nil || *m.CPUNanoCores != 1_500_000 || m.MemoryBytes == nil || *m.MemoryBytes != 2<<20 {
		t.Errorf("cpu/memory = %v/%v, want 1500000 ns and 2 MiB from the PodMetrics", m.CPUNanoCores, m.MemoryBytes)
	}
	if m.HeapBytes == nil || *m.HeapBytes != 1024 || m.HeapLimit == nil || *m.HeapLimit != 4096 || m.DiskBytes == nil || *m.DiskBytes != 24 {
		t.Errorf("heap %v limit %v disk %v, want memory+swap, clusterd's limit, and swap as disk", m.HeapBytes, m.HeapLimit, m.DiskBytes)
	}

	metricsStatus = http.StatusForbidden
	got = o.FetchServiceMetrics(context.Background(), name, 1, warn)
	if got[0].CPUNanoCores != nil || len(warnings) != 1 || !strings.HasPrefix(warnings[0], "Failed to get metrics for mzx-cluster-u1-replica-u1-gen-2-0: ") {
		t.Errorf("a refused metrics read: %+v, warnings %q", got[0], warnings)
	}

	args.Values["orchestrator-kubernetes-disable-pod-metrics-collection"] = []string{"true"}
	mu.Lock()
	paths = nil
	mu.Unlock()
	got = o.FetchServiceMetrics(context.Background(), name, 1, warn)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || len(paths) != 0 {
		t.Errorf("collection disabled: %d results, requests %q; want one empty result and no request", len(got), paths)
	}
}

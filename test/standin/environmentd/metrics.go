package environmentd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// metricsInterval is how often environmentd's cluster controller fetches a
// replica's metrics (upstream controller/src/clusters.rs METRICS_INTERVAL);
// the first fetch is at once.
const metricsInterval = 60 * time.Second

// ProcessMetrics is one replica process's usage as environmentd's
// orchestrator reads it (upstream ServiceProcessMetrics): CPU and memory
// from the resource metrics API, heap and disk from clusterd itself. A
// figure it could not read is nil.
type ProcessMetrics struct {
	CPUNanoCores, MemoryBytes *uint64
	DiskBytes, HeapBytes      *uint64
	HeapLimit                 *uint64
}

// podMetrics is the part of a metrics.k8s.io/v1beta1 PodMetrics read.
type podMetrics struct {
	Containers []struct {
		Usage struct {
			CPU    string `json:"cpu"`
			Memory string `json:"memory"`
		} `json:"usage"`
	} `json:"containers"`
}

// ClusterdUsage is clusterd's answer on /api/usage-metrics (upstream
// clusterd/src/usage_metrics.rs), as clusterd writes it and environmentd's
// orchestrator reads it: the process's resident and swapped memory, its heap
// limit and the disk used under --scratch-directory. A figure clusterd
// cannot read is null.
type ClusterdUsage struct {
	DiskBytes   *uint64 `json:"disk_bytes"`
	MemoryBytes *uint64 `json:"memory_bytes"`
	SwapBytes   *uint64 `json:"swap_bytes"`
	HeapLimit   *uint64 `json:"heap_limit"`
}

// collectsPodMetrics is false under
// --orchestrator-kubernetes-disable-pod-metrics-collection.
func (o *Orchestrator) collectsPodMetrics() bool {
	v, _ := o.Args.Get("orchestrator-kubernetes-disable-pod-metrics-collection")
	return v != "true"
}

// FetchServiceMetrics reads the usage of every process of service name
// (upstream fetch_service_metrics): the pod's PodMetrics and, at the same
// time, clusterd's own usage over its internal HTTP port. Nothing is
// fatal: a failed read leaves that process's figures nil and is logged as
// upstream logs it.
func (o *Orchestrator) FetchServiceMetrics(ctx context.Context, name string, scale int, warn func(msg string)) []ProcessMetrics {
	out := make([]ProcessMetrics, scale)
	if !o.collectsPodMetrics() {
		return out
	}
	for i := range out {
		pod := fmt.Sprintf("%s-%d", name, i)
		type usageResult struct {
			u   ClusterdUsage
			err error
		}
		usage := make(chan usageResult, 1)
		go func() {
			u, err := o.clusterdUsage(ctx, name, i)
			usage <- usageResult{u, err}
		}()
		pm, err := o.podMetrics(ctx, pod)
		cu := <-usage
		if err != nil {
			warn(fmt.Sprintf("Failed to get metrics for %s: %v", pod, err))
			continue
		}
		if cu.err != nil {
			warn(fmt.Sprintf("Failed to fetch clusterd usage for %s: %v", pod, cu.err))
		}
		if len(pm.Containers) == 0 {
			warn(fmt.Sprintf("metrics result contained no containers for %s", pod))
			continue
		}
		m := &out[i]
		if q, err := resource.ParseQuantity(pm.Containers[0].Usage.CPU); err == nil && q.Sign() >= 0 {
			n := uint64(q.ScaledValue(resource.Nano))
			m.CPUNanoCores = &n
		} else {
			warn(fmt.Sprintf("failed to parse CPU value %s", pm.Containers[0].Usage.CPU))
		}
		if q, err := resource.ParseQuantity(pm.Containers[0].Usage.Memory); err == nil && q.Sign() >= 0 {
			n := uint64(q.Value())
			m.MemoryBytes = &n
		} else {
			warn(fmt.Sprintf("failed to parse memory value %s", pm.Containers[0].Usage.Memory))
		}
		if cu.err == nil {
			m.DiskBytes = sumPresent(cu.u.DiskBytes, cu.u.SwapBytes)
			if cu.u.MemoryBytes != nil {
				m.HeapBytes = sumPresent(cu.u.MemoryBytes, cu.u.SwapBytes)
			}
			m.HeapLimit = cu.u.HeapLimit
		}
	}
	return out
}

// sumPresent is a+b where both are known, else the one that is.
func sumPresent(a, b *uint64) *uint64 {
	switch {
	case a != nil && b != nil:
		s := *a + *b
		return &s
	case a != nil:
		return a
	default:
		return b
	}
}

// podMetrics GETs one pod's metrics.k8s.io/v1beta1 PodMetrics, as the
// pod's ServiceAccount.
func (o *Orchestrator) podMetrics(ctx context.Context, pod string) (podMetrics, error) {
	var pm podMetrics
	raw, err := o.Kube.CoreV1().RESTClient().Get().
		AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", o.Namespace, "pods", pod).
		Do(ctx).Raw()
	if err != nil {
		return pm, err
	}
	return pm, json.Unmarshal(raw, &pm)
}

// clusterdUsage reads process i's /api/usage-metrics at the internal-http
// port its Service names, by the process's own DNS name.
func (o *Orchestrator) clusterdUsage(ctx context.Context, name string, i int) (ClusterdUsage, error) {
	var u ClusterdUsage
	svc, err := o.Kube.CoreV1().Services(o.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return u, fmt.Errorf("failed to get service %s: %w", name, err)
	}
	port := serviceInternalHTTPPort(svc)
	if port == 0 {
		return u, fmt.Errorf("internal-http port missing in service spec")
	}
	url := fmt.Sprintf("http://%s-%d.%s.%s.svc.cluster.local:%s/api/usage-metrics", name, i, name, svc.Namespace, strconv.Itoa(int(port)))
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return u, err
	}
	client := o.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return u, err
	}
	defer func() { _ = resp.Body.Close() }()
	// A usage answer is a few numbers: bound what a replica can make us read.
	return u, json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&u)
}

// serviceInternalHTTPPort is the port named internal-http, or 0.
func serviceInternalHTTPPort(svc *corev1.Service) int32 {
	for _, p := range svc.Spec.Ports {
		if p.Name == "internal-http" {
			return p.Port
		}
	}
	return 0
}

// replicaMetrics fetches the metrics of replica r every metricsInterval,
// the first at once, as environmentd's controller does for every replica
// it provisions, until ctx ends. It logs each process's first full read
// (the figures environmentd would record) and every failure.
func (p *Process) replicaMetrics(ctx context.Context, o *Orchestrator, r Replica, gen uint64) {
	size, err := o.sizeOf(r)
	if err != nil {
		return
	}
	name := o.name(r.ServiceID(gen))
	interval := p.MetricsInterval
	if interval == 0 {
		interval = metricsInterval
	}
	logged := make([]bool, size.Scale)
	warn := func(msg string) { p.Log.Warn(msg) }
	for {
		for i, m := range o.FetchServiceMetrics(ctx, name, int(size.Scale), warn) {
			if logged[i] || m.CPUNanoCores == nil || m.MemoryBytes == nil || m.HeapBytes == nil {
				continue
			}
			logged[i] = true
			p.Log.Info("replica metrics", "pod", fmt.Sprintf("%s-%d", name, i),
				"cpu_nano_cores", *m.CPUNanoCores, "memory_bytes", *m.MemoryBytes, "heap_bytes", *m.HeapBytes)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

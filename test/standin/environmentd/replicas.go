package environmentd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/test/standin/ctp"
)

// timelyConfig is mz_cluster_client's TimelyConfig, its fields in the
// order serde_json writes them.
type timelyConfig struct {
	Workers                         uint64   `json:"workers"`
	Process                         uint64   `json:"process"`
	Addresses                       []string `json:"addresses"`
	ArrangementExertProportionality uint32   `json:"arrangement_exert_proportionality"`
	EnableZeroCopy                  bool     `json:"enable_zero_copy"`
	EnableZeroCopyLgalloc           bool     `json:"enable_zero_copy_lgalloc"`
	ZeroCopyLimit                   *uint64  `json:"zero_copy_limit"`
}

// Ports of a clusterd service (upstream src/controller/src/clusters.rs).
const (
	storageCtlPort   = 2100
	computeCtlPort   = 2101
	computePort      = 2102
	storagePort      = 2103
	internalHTTPPort = 6878
)

// hosts are the DNS names of a service's processes, as environmentd's
// orchestrator addresses them: {name}-{i}.{name}.{namespace}.svc.cluster.local.
func (o *Orchestrator) hosts(name string, scale int) []string {
	out := make([]string, scale)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local", name, i, name, o.Namespace)
	}
	return out
}

// clusterdArgs is clusterd's command line as environmentd's cluster
// controller builds it (provision_replica) and its Kubernetes orchestrator
// completes it (the secrets reader's name prefix).
func (o *Orchestrator) clusterdArgs(r Replica, name string, size replicaSize, diskLimit uint64) ([]string, error) {
	get := func(flag string) string { v, _ := o.Args.Get(flag); return v }
	peers := func(port int) []string {
		var out []string
		for _, h := range o.hosts(name, int(size.Scale)) {
			out = append(out, net.JoinHostPort(h, strconv.Itoa(port)))
		}
		return out
	}
	storage, err := json.Marshal(timelyConfig{Workers: size.Workers, Addresses: peers(storagePort), ArrangementExertProportionality: 1337})
	if err != nil {
		return nil, err
	}
	// The compute config's other fields are dyncfgs, at their defaults.
	compute, err := json.Marshal(timelyConfig{Workers: size.Workers, Addresses: peers(computePort), ArrangementExertProportionality: 16})
	if err != nil {
		return nil, err
	}
	args := []string{
		fmt.Sprintf("--storage-controller-listen-addr=0.0.0.0:%d", storageCtlPort),
		fmt.Sprintf("--compute-controller-listen-addr=0.0.0.0:%d", computeCtlPort),
		fmt.Sprintf("--internal-http-listen-addr=0.0.0.0:%d", internalHTTPPort),
		"--opentelemetry-resource=cluster_id=" + r.ClusterID,
		"--opentelemetry-resource=replica_id=" + r.ReplicaID,
		"--persist-pubsub-url=" + get("persist-pubsub-url"),
		"--environment-id=" + get("environment-id"),
		"--storage-timely-config=" + string(storage),
		"--compute-timely-config=" + string(compute),
	}
	if v, ok := o.Args.Get("aws-external-id-prefix"); ok {
		args = append(args, "--aws-external-id-prefix="+v)
	}
	if v, ok := o.Args.Get("aws-connection-role-arn"); ok {
		args = append(args, "--aws-connection-role-arn="+v)
	}
	var memory uint64
	if size.MemoryLimit != nil {
		if memory, err = parseByteSize(*size.MemoryLimit); err != nil {
			return nil, err
		}
		args = append(args, fmt.Sprintf("--announce-memory-limit=%d", memory))
	}
	if size.IsCC {
		args = append(args, "--is-cc")
	}
	// Swap sizes limit their own heap to memory plus the size's disk (a
	// disk limit of 0 means unlimited swap).
	if size.Swap && size.MemoryLimit != nil && size.DiskLimit != nil {
		if disk, err := parseByteSize(*size.DiskLimit); err == nil && disk != 0 {
			args = append(args, fmt.Sprintf("--heap-limit=%d", memory+disk))
		}
	}
	switch get("secrets-controller") {
	case "local-file":
		args = append(args, "--secrets-reader=local-file", "--secrets-reader-local-file-dir="+get("orchestrator-process-secrets-directory"))
	case "aws-secrets-manager":
		return nil, fmt.Errorf("the stand-in does not play the aws-secrets-manager secrets controller")
	default:
		args = append(args, "--secrets-reader=kubernetes", "--secrets-reader-kubernetes-context="+get("orchestrator-kubernetes-context"))
	}
	// The orchestrator's own additions: the scratch disk of a size with
	// one (its ephemeral volume mounted at /scratch), then the prefix.
	if diskLimit != 0 {
		args = append(args, "--scratch-directory=/scratch")
	}
	if o.Prefix != "" {
		args = append(args, "--secrets-reader-name-prefix="+o.Prefix)
	}
	return args, nil
}

// Controller is environmentd's cluster controller as far as a 0dt rollout
// needs it: it connects to each process of its generation's replicas over
// the network (the cluster transport, compute port), creates their
// dataflows and asks whether they are hydrated. Connections are kept
// between checks, as a controller keeps them.
type Controller struct {
	O *Orchestrator
	// Version is environmentd's, which clusterd's must equal.
	Version string
	// HydrateFor, when set, is how long the replicas' dataflows take to
	// hydrate (STANDIN_HYDRATION of environmentd's environment); else the
	// replica's own default.
	HydrateFor string
	// Dial connects to a process (tests replace it).
	Dial func(ctx context.Context, addr, version, host string) (*ctp.Client, error)

	mu       sync.Mutex
	managed  bool
	replicas []Replica
	gen      uint64
	conns    map[string]*ctp.Client
	pods     cache.Store // the orchestrator's pod watch, started by the first check
	stop     context.CancelFunc
}

// watchPods starts the orchestrator's pod watch (upstream's
// watch_services: every pod of its orchestrator namespace, by label) and
// waits for its first list.
func (c *Controller) watchPods(ctx context.Context) error {
	if c.pods != nil {
		return nil
	}
	f := informers.NewSharedInformerFactoryWithOptions(c.O.Kube, 0, informers.WithNamespace(c.O.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = namespaceLabel + "=" + orchestratorNamespace }))
	inf := f.Core().V1().Pods().Informer()
	// The watch lives until Close (the process's end), not one check.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.Start(wctx.Done())
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		cancel()
		f.Shutdown()
		return fmt.Errorf("watching clusterd pods: not synced")
	}
	c.pods, c.stop = inf.GetStore(), func() { cancel(); f.Shutdown() }
	return nil
}

// Manage makes the controller responsible for replicas of generation gen.
func (c *Controller) Manage(replicas []Replica, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replicas, c.gen, c.managed = replicas, gen, true
}

// CaughtUp reports whether every cluster is caught up, and otherwise what
// it waits for (bounded: the first process that holds it up, and the
// count); and, for the stability gate, the health of each cluster caught
// up at this check. As upstream's, a cluster is caught up once one of
// its replicas is (every process Ready and hydrated: upstream asks for
// each collection on some replica), and healthy once every process of
// every replica is Ready.
func (c *Controller) CaughtUp(ctx context.Context) (bool, string, map[string]ClusterHealth) {
	r := c.check(ctx)
	return r.caughtUp, r.why, r.health
}

// AllHydrated reports whether every process of every replica is hydrated
// (a leader connects to every one), and otherwise what it waits for.
func (c *Controller) AllHydrated(ctx context.Context) (bool, string) {
	r := c.check(ctx)
	return r.allHydrated, r.why
}

// checked is one check of the replicas.
type checked struct {
	caughtUp, allHydrated bool
	why                   string
	health                map[string]ClusterHealth
}

func (c *Controller) check(ctx context.Context) checked {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns == nil {
		c.conns = map[string]*ctp.Client{}
	}
	if !c.managed {
		return checked{why: "no replicas created yet"}
	}
	if err := c.watchPods(ctx); err != nil {
		return checked{why: err.Error()}
	}
	pods := map[string]*corev1.Pod{}
	for _, obj := range c.pods.List() {
		if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp == nil {
			pods[p.Name] = p
		}
	}
	total, hydrated := 0, 0
	health := map[string]ClusterHealth{}
	caughtUp := map[string]bool{}    // by cluster: a replica hydrated whole
	pending := map[string][]string{} // by cluster: what its processes wait for
	for _, r := range c.replicas {
		name := c.O.name(r.ServiceID(c.gen))
		size, err := c.O.sizeOf(r)
		if err != nil {
			return checked{why: err.Error()}
		}
		h, ok := health[r.ClusterID]
		if !ok {
			h = ClusterHealth{AllHealthy: true, StatusChanges: map[string]time.Time{}, Restarts: map[string]int32{}}
		}
		whole := true
		for i, host := range c.O.hosts(name, int(size.Scale)) {
			total++
			pod := fmt.Sprintf("%s-%d", name, i)
			ready, changed := podReadiness(pods[pod])
			if p := pods[pod]; p != nil {
				h.StatusChanges[pod], h.Restarts[pod] = changed, restarts(p)
			}
			if !ready {
				h.AllHealthy, whole = false, false
				pending[r.ClusterID] = append(pending[r.ClusterID], pod+" not ready")
				continue
			}
			ok, err := c.hydrated(ctx, net.JoinHostPort(host, strconv.Itoa(computeCtlPort)), host)
			switch {
			case err != nil:
				whole = false
				pending[r.ClusterID] = append(pending[r.ClusterID], fmt.Sprintf("%s unreachable: %v", pod, err))
			case ok:
				hydrated++
			default:
				whole = false
				pending[r.ClusterID] = append(pending[r.ClusterID], pod+" hydrating")
			}
		}
		caughtUp[r.ClusterID] = caughtUp[r.ClusterID] || whole
		health[r.ClusterID] = h
	}
	var waiting, all []string
	for id := range health {
		all = append(all, pending[id]...)
		if !caughtUp[id] {
			waiting = append(waiting, pending[id]...)
			delete(health, id)
		}
	}
	r := checked{caughtUp: len(waiting) == 0, allHydrated: hydrated == total, health: health,
		why: fmt.Sprintf("%d/%d replica processes hydrated", hydrated, total)}
	// What the check waits for: a cluster's first, else (caught up) any.
	if len(waiting) == 0 {
		waiting = all
	}
	if len(waiting) > 0 {
		sort.Strings(waiting)
		r.why += "; " + waiting[0]
	}
	return r
}

// podReadiness is whether a pod is Ready, and when its readiness last
// changed (upstream's process status time, from the orchestrator's pod
// watch).
func podReadiness(p *corev1.Pod) (ready bool, changed time.Time) {
	if p == nil {
		return false, time.Time{}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue, cond.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// restarts is a pod's restart count, as upstream's orchestrator reports
// it: the sum over its containers.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// hydrated asks one process, connecting first when needed.
func (c *Controller) hydrated(ctx context.Context, addr, host string) (bool, error) {
	cl := c.conns[addr]
	if cl == nil {
		dial := c.Dial
		if dial == nil {
			dial = ctp.Dial
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		cl, err = dial(dctx, addr, c.Version, host)
		cancel()
		if err != nil {
			return false, shortError(err)
		}
		c.conns[addr] = cl
	}
	s, err := cl.Do(ctp.Command{Kind: "create-dataflows", HydrateFor: c.HydrateFor}, 5*time.Second)
	if err != nil {
		_ = cl.Close()
		delete(c.conns, addr)
		return false, shortError(err)
	}
	return s.Hydrated, nil
}

// Close ends the controller's connections and its pod watch.
func (c *Controller) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		c.stop()
		c.pods, c.stop = nil, nil
	}
	for addr, cl := range c.conns {
		_ = cl.Close()
		delete(c.conns, addr)
	}
}

// shortError keeps an error's last part: a dial error repeats the address.
func shortError(err error) error {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && len(msg) > 120 {
		msg = msg[i+2:]
	}
	return fmt.Errorf("%s", msg)
}

// Command controllers-bench measures the controllers at scale against a real
// etcd + kube-apiserver: it runs the built controllers binary as one process,
// creates N Materializes (environmentd answered by the test stand-in, which
// promotes at once), and reports how long it takes until every one has
// completed its first rollout (with its Balancer and Console), then the
// controller's resident memory, and the time and memory of a full resync
// (a restarted process reconciling N converged objects), with the Go heap,
// and the API writes per Materialize of each phase from the API server's
// audit log; where the first rollout's time went (reconciles, queue wait,
// API latency, the QPS budget, environmentd's polls, from the leader's
// metrics), and what the kube-apiserver, etcd and the machine used.
//
//	go run ./hack/bench/controllers -n 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/hack/bench/guard"
	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	mzinformers "github.com/materializeinc/orchestratord/pkg/client/informers/externalversions"
	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/test/audit"
	"github.com/materializeinc/orchestratord/test/controlplane"
	"github.com/materializeinc/orchestratord/test/fixture"
	"github.com/materializeinc/orchestratord/test/program"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

func main() {
	n := flag.Int("n", 1000, "Materializes to create")
	workers := flag.Int("workers", 4, "--workers of the controllers")
	qps := flag.Int("qps", 50, "--kube-api-qps of the controllers (burst is twice that)")
	memoryLimit := flag.String("memory-limit", "0", "--memory-limit of the controllers, a quantity such as 112Mi (0: none); the chart passes limits.memory")
	heapProfile := flag.String("heap-profile", "", "write the controllers' heap profile after convergence to this file (go tool pprof)")
	wave := flag.Int("wave", 0, "create the Materializes in waves of this many, each once the one before has rolled out (0: all at once); at 10 000 one burst outgrows this machine's API server")
	var api apiserverSettings
	flag.StringVar(&api.memoryLimit, "apiserver-memory-limit", "", "GOMEMLIMIT of the bench's kube-apiserver (empty: none); at 10 000 Materializes it keeps the API server's garbage within the machine")
	flag.Func("apiserver-flag", "a flag for the bench's kube-apiserver, such as --watch-cache-sizes=events#0 (repeatable)", func(f string) error {
		if !strings.HasPrefix(f, "--") {
			return fmt.Errorf("%q: a kube-apiserver flag starts with --", f)
		}
		api.flags = append(api.flags, f)
		return nil
	})
	apiserverCPUProfile := flag.String("apiserver-cpu-profile", "", "write the kube-apiserver's CPU profile of 30 s of the first rollout (from 10 s after the creates, of the last wave with -wave) to this file (go tool pprof)")
	apiserverHeapProfile := flag.String("apiserver-heap-profile", "", "write the kube-apiserver's heap profile after convergence to this file (go tool pprof)")
	rolloutCPUProfile := flag.String("rollout-cpu-profile", "", "write the controllers' CPU profile of the same 30 s of the first rollout as -apiserver-cpu-profile to this file (go tool pprof)")
	cpuProfile := flag.String("cpu-profile", "", "write the new leader's CPU profile of the hand-over and its resync (8 s from just before the leader stops) to this file (go tool pprof)")
	gogc := flag.String("gogc", "50", "GOGC of the controllers: the chart's controllers.gogc by default; empty for the runtime's 100")
	guardDoc := flag.String("guard", "", "compare the summary with the one recorded in this file (docs/benchmarks.md) and fail when a figure got worse by more than 20%")
	record := flag.Bool("record", false, "with -guard: write this run's summary into the file instead")
	flag.Parse()
	limit, err := resource.ParseQuantity(*memoryLimit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controllers-bench: -memory-limit:", err)
		os.Exit(2)
	}
	figures, err := run(*n, *workers, *qps, limit.Value(), profiles{*heapProfile, *cpuProfile, *apiserverHeapProfile, *apiserverCPUProfile, *rolloutCPUProfile}, *gogc, api, *wave)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controllers-bench:", err)
		os.Exit(1)
	}
	name := fmt.Sprintf("controllers n=%d workers=%d qps=%d", *n, *workers, *qps)
	line := guard.Line(name, figures)
	fmt.Println("\n" + line)
	if *guardDoc != "" {
		// 0.05: of a second, a write per Materialize, a MiB, a CPU-second.
		if err := guard.Check(*guardDoc, name, figures, 0.2, 0.05, *record, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "controllers-bench:", err)
			os.Exit(1)
		}
	}
}

// apiserverSettings tune the bench's kube-apiserver.
type apiserverSettings struct {
	memoryLimit string   // GOMEMLIMIT (empty: none)
	flags       []string // appended to its command line
}

// profiles names the files the bench writes profiles to (empty: none).
type profiles struct {
	heap, cpu, apiserverHeap, apiserverCPU, rolloutCPU string
}

func run(n, workers, qps int, memoryLimit int64, prof profiles, gogc string, api apiserverSettings, wave int) (map[string]float64, error) {
	figures := map[string]float64{}
	return figures, measure(n, workers, qps, memoryLimit, prof, gogc, api, wave, figures)
}

// measure runs the bench, filling figures with the summary's headline
// figures (all lower-is-better).
func measure(n, workers, qps int, memoryLimit int64, prof profiles, gogc string, api apiserverSettings, wave int, figures map[string]float64) error {
	heapProfile, cpuProfile := prof.heap, prof.cpu
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "controllers-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "controllers")
	if err := program.Build(dir, "cmd/controllers"); err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{Audit: true, APIServerMemoryLimit: api.memoryLimit, ExtraAPIServerFlags: api.flags})
	if err != nil {
		return err
	}
	defer cp.Stop()
	env := standin.New()
	env.AutoAdvance = true
	// A new environment's first generation leads at once, as
	// environmentd on a fresh catalog: no promotion.
	env.Catalog = standin.ServiceCatalog
	if _, err := env.Start("127.0.0.1:0"); err != nil {
		return err
	}
	defer env.Close()

	health, err := program.FreeAddr()
	if err != nil {
		return err
	}
	start := func(identity, health, metrics string) (*exec.Cmd, error) {
		cmd := exec.Command(bin, "--kubeconfig="+cp.KubeconfigPath, "--cloud-provider=local", "--region=kind", "--leader-election-namespace=default",
			"--leader-election-identity="+identity, "--health-address="+health, "--metrics-address="+metrics,
			"--profiling="+strconv.FormatBool(heapProfile != "" || cpuProfile != "" || prof.rolloutCPU != ""), "--memory-limit="+strconv.FormatInt(memoryLimit, 10),
			"--workers="+strconv.Itoa(workers), "--log-level=warn",
			"--kube-api-qps="+strconv.Itoa(qps), "--kube-api-burst="+strconv.Itoa(2*qps),
			"--environmentd-url-template="+env.URL()+"/mz{{.ResourceID}}-environmentd-{{.Generation}}",
			"--environmentd-poll-interval=200ms")
		cmd.Stderr = os.Stderr
		if gogc != "" {
			cmd.Env = append(os.Environ(), "GOGC="+gogc)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd, cmd.Start()
	}
	mz := versioned.NewForConfigOrDie(cp.Config)
	apiFlags := ""
	for _, f := range api.flags {
		apiFlags += " -apiserver-flag " + f
	}
	fmt.Printf("go run ./hack/bench/controllers -n %d -workers %d -qps %d -memory-limit %d -gogc %q -apiserver-memory-limit %q%s -wave %d\n\n",
		n, workers, qps, memoryLimit, gogc, api.memoryLimit, apiFlags, wave)

	metrics, err := program.FreeAddr()
	if err != nil {
		return err
	}
	proc, err := start("bench-1", health, metrics)
	if err != nil {
		return err
	}
	began := time.Now()
	machineBefore := readMachineCPU()
	// No nodes run environmentd: its StatefulSets report ready as they would.
	podsCtx, stopPods := context.WithCancel(ctx)
	defer stopPods()
	go fixture.StatefulSetsReady(podsCtx, kubernetes.NewForConfigOrDie(cp.Config), "default")
	// Nor balancerd (a Console is applied once its Balancer is Ready, which
	// needs balancerd's Deployment Available) or the console (so that the
	// first rollout ends with every Console Ready and the resync that
	// follows has nothing left to write).
	go fixture.DeploymentsAvailable(podsCtx, kubernetes.NewForConfigOrDie(cp.Config), "default", "-balancerd", "-console")
	if _, err := kubernetes.NewForConfigOrDie(cp.Config).CoreV1().Secrets("default").Create(ctx, fixture.BackendSecret("default", "backend"), metav1.CreateOptions{}); err != nil {
		return err
	}
	if wave <= 0 || wave > n {
		wave = n
	}
	var created time.Duration
	var waves []string
	var waveBegan time.Time
	for done := 0; done < n; done += wave {
		size := min(wave, n-done)
		waveBegan = time.Now()
		if err := createRange(ctx, mz, done, done+size); err != nil {
			return err
		}
		created += time.Since(waveBegan)
		if done+size == n {
			break // the last wave's convergence is the rollout's, below
		}
		if err := waitConverged(ctx, mz, done+size, timeoutFor(size)); err != nil {
			return err
		}
		waves = append(waves, fmt.Sprintf("%d–%d: %.1f s", done, done+size, time.Since(waveBegan).Seconds()))
		// As it happens: a run the machine cannot finish still shows how
		// far it got and how the processes grew.
		apiserver, etcd := cp.PIDs()
		m, a, e := snapshot(proc.Process.Pid, metrics), procStatus(apiserver), procStatus(etcd)
		fmt.Printf("wave %s; then controllers RSS %s, Go heap in use %s; kube-apiserver RSS %s, etcd %s\n",
			waves[len(waves)-1], mib(m.rss), mib(m.heapInUse), mib(a["VmRSS"]), mib(e["VmRSS"]))
	}
	apiserverProfiled, rolloutProfiled := make(chan error, 1), make(chan error, 1)
	if prof.apiserverCPU != "" {
		go func() {
			time.Sleep(10 * time.Second)
			apiserverProfiled <- saveAPIServerProfile(ctx, cp, "/debug/pprof/profile", "30", prof.apiserverCPU)
		}()
	} else {
		apiserverProfiled <- nil
	}
	if prof.rolloutCPU != "" {
		go func() {
			time.Sleep(10 * time.Second)
			rolloutProfiled <- saveProfile("http://"+health+"/debug/pprof/profile?seconds=30", prof.rolloutCPU)
		}()
	} else {
		rolloutProfiled <- nil
	}
	if err := waitConverged(ctx, mz, n, timeoutFor(n)); err != nil {
		return err
	}
	converged := time.Since(began)
	machineAfter := readMachineCPU()
	if len(waves) > 0 {
		waves = append(waves, fmt.Sprintf("%d–%d: %.1f s", n-(n-1)%wave-1, n, time.Since(waveBegan).Seconds()))
	}
	// Read before the heap profile, which runs a collection.
	mem := snapshot(proc.Process.Pid, metrics)
	live := ""
	if heapProfile != "" {
		if live, err = saveHeapProfile(health, metrics, heapProfile); err != nil {
			return err
		}
	}
	fmt.Printf("| phase | result |\n|---|---|\n")
	fmt.Printf("| create %d Materializes (client side) | %v |\n", n, created.Round(time.Millisecond))
	if len(waves) > 0 {
		fmt.Printf("| waves of %d, each created once the one before had rolled out: from its creates to its rollout | %s |\n", wave, strings.Join(waves, "; "))
	}
	fmt.Printf("| all %d rolled out (UpToDate=True, Console Ready) | %v (%.1f Materializes/s) |\n",
		n, converged.Round(time.Millisecond), float64(n)/converged.Seconds())
	mem.print("after convergence")
	figures["first_rollout_s"] = converged.Seconds()
	figures["rss_converged_mib"] = float64(mem.rss) / (1 << 20)
	figures["rollout_cpu_s"] = mem.cpuSeconds
	if live != "" {
		fmt.Printf("| live heap after a collection (the runtime's HeapAlloc, scraped right after the heap profile's collection) | %s |\n", live)
	}
	printWhereTimeGoes(metrics, workers, converged, env, n)
	printMachineCPU(machineBefore, machineAfter)
	printControlPlane(cp, "after convergence")
	if prof.apiserverHeap != "" {
		if err := saveAPIServerProfile(ctx, cp, "/debug/pprof/heap", "", prof.apiserverHeap); err != nil {
			return err
		}
	}
	if err := <-rolloutProfiled; err != nil {
		return fmt.Errorf("controllers' CPU profile: %w", err)
	}
	if err := <-apiserverProfiled; err != nil {
		return err
	}
	if figures["rollout_writes_per_materialize"], err = printWrites(cp, "bench-1", n, "first rollout"); err != nil {
		return err
	}

	// A standby with warm caches, as a replica of the chart is, takes over
	// when the leader is stopped; a user's change made while the leader
	// drains (it takes no new work), to the Materialize the resync lists
	// last, must be acted on first, not after the resync.
	health2, err := program.FreeAddr()
	if err != nil {
		return err
	}
	if metrics, err = program.FreeAddr(); err != nil {
		return err
	}
	standby, err := start("bench-2", health2, metrics)
	if err != nil {
		return err
	}
	if err := waitReady(health2); err != nil {
		return err
	}
	// The standby's CPU with its caches synced, before it leads: the
	// resync's own CPU is what it uses from here.
	warm := snapshot(standby.Process.Pid, metrics)
	profiled := make(chan error, 1)
	if cpuProfile != "" {
		go func() { profiled <- saveProfile("http://"+health2+"/debug/pprof/profile?seconds=8", cpuProfile) }()
		time.Sleep(100 * time.Millisecond)
	} else {
		profiled <- nil
	}
	_ = proc.Process.Signal(syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond) // draining: it takes no new work
	changed := fmt.Sprintf("mz-%04d", n-1)
	generation, err := changeSpec(ctx, mz, changed)
	if err != nil {
		return err
	}
	stopped := time.Now()
	actedOn := make(chan time.Duration, 1)
	go func() { actedOn <- waitObserved(ctx, mz, changed, generation, stopped) }()
	led := make(chan time.Duration, 1)
	go func() { led <- waitLeading(ctx, kubernetes.NewForConfigOrDie(cp.Config), "bench-2", stopped) }()
	_ = proc.Wait()
	proc = standby
	// A converged resync writes nothing; wait until the new leader has
	// reconciled every Materialize once.
	if err := waitResync(metrics, n); err != nil {
		return err
	}
	mem = snapshot(proc.Process.Pid, metrics)
	leading, acted := <-led, <-actedOn
	fmt.Printf("| full resync of %d converged Materializes by a new leader (warm standby; and one changed meanwhile) | %v after it led |\n", n, time.Since(stopped.Add(leading)).Round(time.Millisecond))
	fmt.Printf("| the standby leads the materialize Lease | %v after the leader was stopped |\n", leading.Round(time.Millisecond))
	fmt.Printf("| the Materialize changed during the hand-over, acted on (status.observedGeneration caught up) | %v after the new leader led |\n", (acted - leading).Round(time.Millisecond))
	mem.print("after the resync")
	printControlPlane(cp, "after the resync")
	figures["resync_s"] = time.Since(stopped.Add(leading)).Seconds()
	figures["change_acted_after_lead_s"] = (acted - leading).Seconds()
	figures["resync_standby_cpu_s"] = mem.cpuSeconds
	figures["resync_cpu_s"] = mem.cpuSeconds - warm.cpuSeconds
	fmt.Printf("| controller CPU of the resync (from caches synced, as a standby, to the resync done) | %.2f s |\n", figures["resync_cpu_s"])
	if figures["resync_writes_per_materialize"], err = printWrites(cp, "bench-2", n, "resync"); err != nil {
		return err
	}
	if err := <-profiled; err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	_ = proc.Process.Signal(syscall.SIGTERM)
	_ = proc.Wait()
	return nil
}

// createRange creates the Materializes mz-<from> to mz-<to-1>.
func createRange(ctx context.Context, mz versioned.Interface, from, to int) error {
	var wg sync.WaitGroup
	errs := make(chan error, to-from)
	sem := make(chan struct{}, 16)
	for i := from; i < to; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := mz.MaterializeV1alpha1().Materializes("default").Create(ctx, &v1alpha1.Materialize{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mz-%04d", i)},
				Spec:       v1alpha1.MaterializeSpec{EnvironmentdImageRef: "materialize/environmentd:v26.1.0", BackendSecretName: "backend"},
			}, metav1.CreateOptions{})
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// waitConverged waits until every Materialize has rolled out its first
// generation and every Console is Ready, watching both (a LIST of them all
// twice a second would load the API server the bench measures).
func waitConverged(ctx context.Context, mz versioned.Interface, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	factory := mzinformers.NewSharedInformerFactoryWithOptions(mz, 0, mzinformers.WithNamespace("default"))
	defer func() { cancel(); factory.Shutdown() }()
	materializes := factory.Materialize().V1alpha1().Materializes().Lister()
	consoles := factory.Materialize().V1alpha1().Consoles().Lister()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	for ctx.Err() == nil {
		done := 0
		list, _ := materializes.List(labels.Everything())
		for _, m := range list {
			c := meta.FindStatusCondition(m.Status.Conditions, "UpToDate")
			if c != nil && c.Status == metav1.ConditionTrue && m.Status.ActiveGeneration == 1 {
				done++
			}
		}
		cs, _ := consoles.List(labels.Everything())
		for _, c := range cs {
			ready := meta.FindStatusCondition(c.Status.Conditions, "Ready")
			if ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == c.Generation {
				done++
			}
		}
		if done == 2*n {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not converged within %v", timeout)
}

// changeSpec changes a Materialize's spec as a user would, and returns its
// new generation.
func changeSpec(ctx context.Context, mz versioned.Interface, name string) (int64, error) {
	obj, err := mz.MaterializeV1alpha1().Materializes("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	obj.Spec.EnvironmentdExtraEnv = append(obj.Spec.EnvironmentdExtraEnv, corev1.EnvVar{Name: "BENCH_CHANGE", Value: "1"})
	obj, err = mz.MaterializeV1alpha1().Materializes("default").Update(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		return 0, err
	}
	return obj.Generation, nil
}

// timeoutFor bounds a wait over n Materializes: ten minutes, or 300 ms
// each at 10 000 (a first rollout there takes over half an hour).
func timeoutFor(n int) time.Duration {
	return max(10*time.Minute, time.Duration(n)*300*time.Millisecond)
}

// waitObserved returns how long after since the Materialize's status
// observed generation (or -1 after ten minutes).
func waitObserved(ctx context.Context, mz versioned.Interface, name string, generation int64, since time.Time) time.Duration {
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		obj, err := mz.MaterializeV1alpha1().Materializes("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil && obj.Status.ObservedGeneration >= generation {
			return time.Since(since)
		}
	}
	return -1
}

// waitLeading returns how long after since identity held the materialize
// Lease (or -1 after ten minutes).
func waitLeading(ctx context.Context, kube kubernetes.Interface, identity string, since time.Time) time.Duration {
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		l, err := kube.CoordinationV1().Leases("default").Get(ctx, leaderelection.LeaseMaterialize, metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == identity {
			return time.Since(since)
		}
	}
	return -1
}

// waitReady waits until a controllers process's /readyz says its caches
// are synced.
func waitReady(health string) error {
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + health + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("%s not ready", health)
}

// waitResync waits until the process's reconcile counter shows every
// Materialize reconciled once by the materialize controller.
func waitResync(metrics string, n int) error {
	deadline := time.Now().Add(timeoutFor(n))
	for time.Now().Before(deadline) {
		if count, err := reconciles(metrics, "materialize"); err == nil && count >= n {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("resync did not finish")
}

func reconciles(metrics, controller string) (int, error) {
	v, err := program.Metric(metrics, "orchestratord_reconciles_total", `controller="`+controller+`"`)
	return int(v), err
}

// printWrites reports the writes a controllers process made, per
// Materialize, from the audit log: Lease writes (the election) apart,
// Events apart, the rest by resource.
func printWrites(cp *controlplane.ControlPlane, identity string, n int, phase string) (perMaterialize float64, err error) {
	// Only this process's lines are decoded: at 10 000 Materializes the
	// log holds millions of the bench's and the stand-ins' requests.
	events, err := audit.Read(cp.AuditLogPath, "orchestratord-controllers/"+identity)
	if err != nil {
		return 0, err
	}
	byResource := map[string]int{}
	perObject := map[string]int{} // resource and name: writes of one object
	total, leases, recorded := 0, 0, 0
	gets := map[string]int{} // reads of one object, which the informers' caches are there to spare
	for _, ev := range events {
		if ev.By("orchestratord-controllers/"+identity) && ev.Verb == "get" && ev.ObjectRef != nil && ev.ObjectRef.Resource != "leases" {
			r := ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				r += "/" + ev.ObjectRef.Subresource
			}
			gets[r]++
		}
		if !ev.By("orchestratord-controllers/"+identity) || !ev.IsWrite() || !ev.Succeeded() || ev.ObjectRef == nil {
			continue
		}
		switch ev.ObjectRef.Resource {
		case "leases":
			leases++
		case "events":
			recorded++
		default:
			total++
			r := ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				r += "/" + ev.ObjectRef.Subresource
			}
			byResource[ev.Verb+" "+r]++
			perObject[r+" "+ev.ObjectRef.Namespace+"/"+ev.ObjectRef.Name]++
		}
	}
	// Objects written more than once, by resource: where a phase could
	// save requests (a status written at each transition is expected).
	repeated := map[string]int{}
	for k, count := range perObject {
		if count > 1 {
			repeated[strings.Fields(k)[0]] += count - 1
		}
	}
	keys := make([]string, 0, len(byResource))
	for k := range byResource {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", k, float64(byResource[k])/float64(n))
	}
	fmt.Printf("| API writes per Materialize, %s (Events %.2f and Lease writes %d apart) | %.2f: %s |\n",
		phase, float64(recorded)/float64(n), leases, float64(total)/float64(n), strings.Join(parts, ", "))
	again := make([]string, 0, len(repeated))
	for r, count := range repeated {
		again = append(again, fmt.Sprintf("%s %.2f", r, float64(count)/float64(n)))
	}
	sort.Strings(again)
	fmt.Printf("| of which second and later writes of one object, per Materialize | %s |\n", strings.Join(again, ", "))
	reads := make([]string, 0, len(gets))
	for r, count := range gets {
		reads = append(reads, fmt.Sprintf("%s %.2f", r, float64(count)/float64(n)))
	}
	sort.Strings(reads)
	fmt.Printf("| GETs per Materialize, %s (Leases apart) | %s |\n", phase, strings.Join(reads, ", "))
	return float64(total) / float64(n), nil
}

// saveHeapProfile writes the controllers' heap profile, taken after a
// collection, and returns the live heap then: the runtime's HeapAlloc
// (go_memstats_heap_alloc_bytes), scraped right after (it also counts what
// was allocated in between), where the profile's sampled sizes are
// estimates.
func saveHeapProfile(health, metrics, path string) (string, error) {
	if err := saveProfile("http://"+health+"/debug/pprof/heap?gc=1", path); err != nil {
		return "", fmt.Errorf("heap profile: %w", err)
	}
	live, err := program.Metric(metrics, "go_memstats_heap_alloc_bytes")
	if err != nil {
		return "", fmt.Errorf("live heap: %w", err)
	}
	return fmt.Sprintf("%.1f MiB", live/(1<<20)), nil
}

// memorySnapshot is a process's RSS, split into its file-backed pages
// (the binary's code and data) and anonymous memory, and the Go runtime's
// view of it from one scrape: heap in use, heap kept free but not yet
// returned to the OS, and the rest (stacks, GC metadata, spans).
type memorySnapshot struct {
	rss, peak, file, anon    int64
	image                    int64 // the binary's own mappings, resident or not
	heapInUse, free, runtime int64
	cpuSeconds               float64
}

func snapshot(pid int, metrics string) memorySnapshot {
	status := procStatus(pid)
	m := memorySnapshot{rss: status["VmRSS"], peak: status["VmHWM"], file: status["RssFile"], anon: status["RssAnon"], image: mappedImage(pid)}
	e, err := program.Scrape(metrics)
	if err != nil {
		return m // the runtime's figures stay 0: a report, not a check
	}
	gauge := func(name string) int64 {
		v, _ := e.Sum(name)
		return int64(v)
	}
	m.heapInUse = gauge("go_memstats_heap_inuse_bytes")
	m.free = gauge("go_memstats_heap_idle_bytes") - gauge("go_memstats_heap_released_bytes")
	m.runtime = gauge("go_memstats_sys_bytes") - gauge("go_memstats_heap_sys_bytes")
	m.cpuSeconds, _ = e.Sum("process_cpu_seconds_total")
	return m
}

func (m memorySnapshot) print(phase string) {
	fmt.Printf("| controller RSS %s (peak); Go heap in use | %s (%s); %s |\n", phase, mib(m.rss), mib(m.peak), mib(m.heapInUse))
	fmt.Printf("| controller RSS %s, by kind | file-backed %s (the binary maps %s), anonymous %s; Go heap in use %s, free not released %s, runtime besides the heap %s |\n",
		phase, mib(m.file), mib(m.image), mib(m.anon), mib(m.heapInUse), mib(m.free), mib(m.runtime))
	fmt.Printf("| controller CPU since it started, %s | %.1f s |\n", phase, m.cpuSeconds)
}

// procStatus returns the sizes /proc/<pid>/status reports, in bytes, by
// name (VmRSS, RssFile, ...); empty once the process is gone.
func procStatus(pid int) map[string]int64 {
	sizes := map[string]int64{}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return sizes
	}
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 3 && fields[2] == "kB" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			sizes[strings.TrimSuffix(fields[0], ":")] = kb * 1024
		}
	}
	return sizes
}

// mappedImage is the size of pid's mappings of its own executable: what
// its file-backed RSS would be were every page of the binary resident.
func mappedImage(pid int) int64 {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0
	}
	var size int64
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		start, end, _ := strings.Cut(fields[0], "-")
		from, err1 := strconv.ParseUint(start, 16, 64)
		to, err2 := strconv.ParseUint(end, 16, 64)
		if err1 == nil && err2 == nil {
			size += int64(to - from)
		}
	}
	return size
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// saveProfile writes what url (a pprof endpoint) returns to file.
func saveProfile(url, file string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// printWhereTimeGoes reports where the first rollout's time went, from the
// leader's own metrics scraped at convergence: per controller, the
// reconciles and their mean duration (API calls included), the mean wait
// in the work queue (a requeue's delay apart: it counts from when the key
// is due), and how busy the workers were; the API requests, their mean
// latency and the time spent waiting for the client's QPS budget; and the
// leader API requests (environmentd's status polls and promotions).
func printWhereTimeGoes(metrics string, workers int, wall time.Duration, env *standin.Server, n int) {
	e, err := program.Scrape(metrics)
	if err != nil {
		fmt.Printf("| where the time went | not scraped: %v |\n", err)
		return
	}
	sum := func(name string, labels ...string) float64 {
		v, _ := e.Sum(name, labels...)
		return v
	}
	mean := func(total, count float64) time.Duration {
		if count == 0 {
			return 0
		}
		return time.Duration(total / count * float64(time.Second)).Round(time.Microsecond)
	}
	for _, c := range []string{"materialize", "balancer", "console"} {
		q := `name="` + c + `"`
		reconciles := sum("workqueue_work_duration_seconds_count", q)
		busy := sum("workqueue_work_duration_seconds_sum", q)
		fmt.Printf("| %s controller: reconciles per Materialize; mean reconcile; mean queue wait; its %d workers busy | %.1f; %v; %v; %.0f %% |\n",
			c, workers, reconciles/float64(n), mean(busy, reconciles),
			mean(sum("workqueue_queue_duration_seconds_sum", q), sum("workqueue_queue_duration_seconds_count", q)),
			100*busy/(float64(workers)*wall.Seconds()))
	}
	requests := sum("rest_client_request_duration_seconds_count")
	limited := sum("rest_client_rate_limiter_duration_seconds_sum")
	fmt.Printf("| API requests per Materialize; mean latency; waited for the QPS budget in all | %.1f; %v; %.1f s |\n",
		requests/float64(n), mean(sum("rest_client_request_duration_seconds_sum"), requests), limited)
	polls := 0
	for _, prefix := range env.Prefixes() {
		polls += env.Requests(prefix)
	}
	fmt.Printf("| environmentd leader API requests per Materialize (status polls, promotion) | %.1f |\n", float64(polls)/float64(n))
}

// printControlPlane reports the kube-apiserver's and etcd's resident
// memory and CPU since they started: what the operator's load costs the
// API server, and what bounds the bench on one machine.
func printControlPlane(cp *controlplane.ControlPlane, phase string) {
	apiserver, etcd := cp.PIDs()
	a, e := procStatus(apiserver), procStatus(etcd)
	fmt.Printf("| kube-apiserver, etcd %s: RSS (peak); CPU since start | %s (%s), %s (%s); %.0f s, %.0f s |\n",
		phase, mib(a["VmRSS"]), mib(a["VmHWM"]), mib(e["VmRSS"]), mib(e["VmHWM"]), procCPU(apiserver), procCPU(etcd))
}

// procCPU returns the CPU-seconds a process has used (user and system,
// in clock ticks of 100 a second on Linux); 0 once it is gone.
func procCPU(pid int) float64 {
	fields, err := program.ProcStat(pid)
	if err != nil {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100
}

// saveAPIServerProfile writes one of the kube-apiserver's profiles (its
// /debug/pprof, which --profiling serves by default, read as the bench's
// admin) to path; seconds is the CPU profile's length.
func saveAPIServerProfile(ctx context.Context, cp *controlplane.ControlPlane, endpoint, seconds, path string) error {
	config := *cp.Config
	config.Timeout = 0 // a CPU profile takes its seconds to answer
	req := kubernetes.NewForConfigOrDie(&config).CoreV1().RESTClient().Get().AbsPath(endpoint)
	if seconds != "" {
		req = req.Param("seconds", seconds)
	}
	raw, err := req.DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("kube-apiserver %s: %w", endpoint, err)
	}
	return os.WriteFile(path, raw, 0o644)
}

// machineCPU is the machine's CPU time from /proc/stat's first line, in
// clock ticks: busy (user, nice, system, irq, softirq), idle (with I/O
// wait) and stolen by the hypervisor.
type machineCPU struct{ busy, idle, steal float64 }

func readMachineCPU() machineCPU {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 9 {
		return machineCPU{}
	}
	v := func(i int) float64 { f, _ := strconv.ParseFloat(fields[i], 64); return f }
	return machineCPU{busy: v(1) + v(2) + v(3) + v(6) + v(7), idle: v(4) + v(5), steal: v(8)}
}

// printMachineCPU reports how busy the whole machine was between two
// readings: every process of the bench shares its cores, and a figure
// measured while the hypervisor stole time is slower for that alone.
func printMachineCPU(before, after machineCPU) {
	busy, idle, steal := after.busy-before.busy, after.idle-before.idle, after.steal-before.steal
	total := busy + idle + steal
	if total <= 0 {
		return
	}
	fmt.Printf("| the machine's CPU over the first rollout: busy; idle; stolen by the hypervisor | %.0f %%; %.0f %%; %.0f %% |\n",
		100*busy/total, 100*idle/total, 100*steal/total)
}

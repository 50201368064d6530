package environmentd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
)

// Process is what a stand-in environmentd process reaches outside itself.
type Process struct {
	Log     *slog.Logger
	Catalog Catalog
	// Orchestrator, when set, makes environmentd's Kubernetes calls.
	Orchestrator *Orchestrator
	// Replicas is the cluster controller a new generation waits for: it is
	// caught up once every process of its replicas is Ready and hydrated.
	// Nil: caught up at the first check (tests of the process alone).
	Replicas CaughtUpChecker
	// FenceCheck is how often a leader looks whether a newer generation
	// took the catalog over (real environmentd learns it on its next
	// catalog write).
	FenceCheck time.Duration
	// RetryFor bounds the retries of the VpcEndpoint list at bootstrap
	// (upstream: 10 minutes), after which environmentd fails.
	RetryFor time.Duration
	// Deployment is the leader API's state; nil means a new one.
	Deployment *Deployment
	// MetricsInterval is how often each replica's metrics are read; zero
	// is upstream's minute.
	MetricsInterval time.Duration

	background sync.WaitGroup
	served     chan error // the listeners' end: nil once ctx ends, else why they failed
}

// Exit codes of environmentd's process (upstream src/ore/src/process.rs).
const (
	// ExitHalt is halt!: a restart that is not a crash.
	ExitHalt = 166
	// ExitFenced is exit!(0): fenced out by a newer generation; the image's
	// entrypoint then sleeps forever instead of letting the pod restart.
	ExitFenced = 0
	// ExitPanic is a panic: the enhanced panic handler aborts the process
	// (SIGABRT, 128+6).
	ExitPanic = 134
)

func halt(format string, a ...any) *ExitError {
	return &ExitError{Code: ExitHalt, Message: "halting process: " + fmt.Sprintf(format, a...)}
}

// Run is environmentd after its command line parsed: it serves plan's
// listeners at once (the leader API answers Initializing), then boots as
// upstream's 0dt preflight decides from the catalog's deploy generation:
//   - a fresh catalog, or its own generation's: opens it and is the leader;
//   - an older generation's: boots read-only, catches up, announces
//     ReadyToPromote, and once promoted takes the catalog over and halts
//     (exit 166) to reboot as the leader;
//   - a newer generation's: fenced out, exits 0.
//
// A leader that finds a newer generation holding the catalog exits 0 too. Both
// read-only and leading processes make the orchestrator's boot calls. It
// returns nil when ctx ends, else the ExitError the process ends with.
func (p *Process) Run(ctx context.Context, plan *Plan) error {
	gen, err := strconv.ParseUint(plan.Generation, 10, 64)
	if err != nil {
		return fatal("invalid --deploy-generation %q: %v", plan.Generation, err)
	}
	d := p.Deployment
	if d == nil {
		d = NewDeployment()
	}
	// Everything Run starts ends with it: the listeners, the orchestrator's
	// background calls.
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		p.background.Wait()
		if c, ok := p.Replicas.(*Controller); ok {
			c.Close()
		}
	}()
	p.served = make(chan error, 1)
	p.background.Go(func() { p.served <- Serve(ctx, plan, d) })

	var catalogGen uint64
	var initialized bool
	err = p.catalogCall(ctx, func() (err error) { catalogGen, initialized, err = p.Catalog.Generation(ctx); return err })
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fatal("%v", err)
	}
	if err := checkPreflightParameters(plan); err != nil {
		return fatal("%v", err)
	}
	p.Log.Info("performing 0dt preflight checks", "deploy_generation", gen, "catalog_initialized", initialized, "catalog_generation", catalogGen)
	// Opening the catalog parses the system parameter defaults: one that
	// does not parse fails the boot (upstream catalog/open.rs).
	if !(initialized && catalogGen > gen) {
		if err := checkSystemParameters(plan); err != nil {
			return fatal("%v", err)
		}
	}
	switch {
	case initialized && catalogGen > gen:
		return &ExitError{Code: ExitFenced, Message: "this deployment has been fenced out"}
	case initialized && catalogGen < gen:
		return p.readOnly(ctx, plan, d, gen)
	}
	err = p.catalogCall(ctx, func() error { return p.Catalog.Open(ctx, gen) })
	switch {
	case ctx.Err() != nil:
		return nil
	case errors.Is(err, errFenced):
		return &ExitError{Code: ExitFenced, Message: "this deployment has been fenced out"}
	case err != nil:
		return fatal("%v", err)
	}
	d.SetIsLeader()
	p.Log.Info("booting with writes allowed", "deploy_generation", gen)
	if err := p.bootstrap(ctx, plan, gen, false); err != nil {
		return err
	}
	p.background.Go(func() { p.cleanupOrphanedSecrets(ctx) })
	d.SetAdapterReady()
	return p.lead(ctx, gen)
}

// readOnly is a new generation: it boots read-only, waits to catch up (or
// to be told to skip it), then for its promotion, takes the catalog over
// and halts to reboot as the leader.
func (p *Process) readOnly(ctx context.Context, plan *Plan, d *Deployment, gen uint64) error {
	p.Log.Info("this deployment is a new generation; booting in read only mode", "deploy_generation", gen)
	// The user objects when preflight began: DDL since means the dataflows
	// being hydrated are not the ones the leader serves.
	var items UserItems
	err := p.catalogCall(ctx, func() (err error) { items, err = p.Catalog.UserItems(ctx); return err })
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fatal("%v", err)
	}
	if err := p.bootstrap(ctx, plan, gen, true); err != nil {
		return err
	}
	d.SetAdapterReady() // the coordinator serves, read-only
	if err := p.catchUp(ctx, plan, d, items.NextFromIDs()); err != nil {
		return err
	}
	promoted := d.SetReadyToPromote()
	p.Log.Info("announced as ready to promote; waiting for promotion")
	select {
	case <-promoted:
	case err := <-p.served:
		return p.servingEnded(err)
	}
	p.Log.Info("promoted; attempting takeover")
	if err := p.catalogCall(ctx, func() error { return p.Catalog.Open(ctx, gen) }); ctx.Err() != nil {
		return nil
	} else if errors.Is(err, errFenced) {
		return &ExitError{Code: ExitFenced, Message: "unexpected error while fencing out old deployment: " + err.Error()}
	} else if err != nil {
		return fatal("unexpected error while fencing out old deployment: %v", err)
	}
	return halt("fenced out old deployment; rebooting as leader")
}

// lead serves as the leader until ctx ends or a newer generation takes the
// catalog over: then, as environmentd whose catalog write meets the fence
// of a higher deploy generation, it exits 0 (and its entrypoint sleeps).
func (p *Process) lead(ctx context.Context, gen uint64) error {
	tick := time.NewTicker(p.FenceCheck)
	defer tick.Stop()
	for {
		select {
		case err := <-p.served:
			return p.servingEnded(err)
		case <-tick.C:
		}
		held, _, err := p.Catalog.Generation(ctx)
		if err != nil {
			p.Log.Warn("reading the catalog failed", "error", err)
			continue
		}
		if held > gen {
			return &ExitError{Code: ExitFenced, Message: fmt.Sprintf("fenced out by deploy generation %d", held)}
		}
	}
}

// servingEnded is Run's end once its listeners stopped: nil when ctx
// ended, environmentd's fatal exit when a listener failed.
func (p *Process) servingEnded(err error) error {
	if err != nil {
		return fatal("serving: %v", err)
	}
	return nil
}

// bootstrap makes the Kubernetes calls environmentd makes while it boots:
// the cloud-resource controller lists VpcEndpoints (retried, then fatal),
// the orchestrator ensures the bootstrap replicas' clusterd Services and
// StatefulSets of this generation and, as the leader, drops those of past
// generations (both retried in the background, as environmentd's
// orchestrator worker retries forever).
func (p *Process) bootstrap(ctx context.Context, plan *Plan, gen uint64, readOnly bool) error {
	o := p.Orchestrator
	if o == nil {
		return nil
	}
	n := 0
	err := retry(ctx, p.Log, "VPC endpoint API call failed", time.Now().Add(p.RetryFor), func() (err error) {
		n, err = o.ListVpcEndpoints(ctx)
		return err
	})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fatal("%v", err)
	}
	p.Log.Info("listed vpc endpoints", "count", n)
	replicas, err := BootstrapReplicas(plan.Args)
	if err != nil {
		return fatal("%v", err)
	}
	if c, ok := p.Replicas.(*Controller); ok {
		// The controller connects to its replicas and creates their
		// dataflows as soon as they run, whatever the role; a new
		// generation's catch-up checks then only read how far they are.
		c.Manage(replicas, gen)
		p.background.Go(func() { p.connectReplicas(ctx, c) })
	}
	for _, r := range replicas {
		p.background.Go(func() { p.replicaMetrics(ctx, o, r, gen) })
	}
	p.background.Go(func() {
		_ = retry(ctx, p.Log, "orchestrator call failed", time.Time{}, p.ensureReplicas(ctx, o, replicas, gen, readOnly))
	})
	return nil
}

// connectReplicas drives the replicas every second until all are hydrated.
func (p *Process) connectReplicas(ctx context.Context, c *Controller) {
	last := ""
	for {
		ok, why := c.AllHydrated(ctx)
		if ok {
			p.Log.Info("cluster replicas hydrated", "replicas", why)
			return
		}
		if why != last {
			p.Log.Info("cluster replicas not hydrated", "waiting_for", why)
			last = why
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// ensureReplicas applies this generation's replicas and, as the leader,
// drops those of past generations.
func (p *Process) ensureReplicas(ctx context.Context, o *Orchestrator, replicas []Replica, gen uint64, readOnly bool) func() error {
	return func() error {
		if err := o.loadOwners(ctx); err != nil {
			return err
		}
		for _, r := range replicas {
			if err := o.EnsureReplica(ctx, r, gen); err != nil {
				return err
			}
			p.Log.Info("ensured cluster replica", "service", o.name(r.ServiceID(gen)), "size", r.Size)
		}
		if readOnly {
			return nil
		}
		dropped, err := o.DropPastGenerations(ctx, gen)
		if len(dropped) > 0 {
			p.Log.Info("dropped services of past generations", "services", dropped)
		}
		return err
	}
}

// retry runs f until it succeeds, ctx ends or, unless it is zero, deadline
// passes, backing off as environmentd's retries do (125 ms doubling to
// 10 s) and logging each failure as msg. It returns f's last error, or
// ctx's.
func retry(ctx context.Context, log *slog.Logger, msg string, deadline time.Time, f func() error) error {
	for backoff := 125 * time.Millisecond; ; backoff = min(2*backoff, 10*time.Second) {
		err := f()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return err
		}
		log.Warn(msg, "error", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
	}
}

// KubeClientConfig is the API server and namespace environmentd's
// orchestrator talks to: in a pod its ServiceAccount's, else KUBECONFIG's
// (tests run outside a pod). environmentd panics when it cannot create its
// orchestrator: exit 134.
func KubeClientConfig() (*rest.Config, string, error) {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil)
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fatal("creating kubernetes orchestrator: %v", err)
	}
	ns, _, err := loader.Namespace()
	if err != nil {
		return nil, "", fatal("creating kubernetes orchestrator: %v", err)
	}
	return cfg, ns, nil
}

// KubeProcess is a Process for a pod in namespace, talking to the API server
// with cfg (the pod's ServiceAccount): its catalog in a Secret, its
// orchestrator's calls, the owners of its own pod (named by HOSTNAME).
func KubeProcess(ctx context.Context, log *slog.Logger, plan *Plan, version, hydrateFor string, cfg *rest.Config, namespace, podName string) (*Process, error) {
	// Upstream panics creating its orchestrator ("creating kubernetes
	// orchestrator"): exit 134.
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fatal("creating kubernetes orchestrator: %v", err)
	}
	mz, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, fatal("creating kubernetes orchestrator: %v", err)
	}
	prefix, _ := plan.Args.Get("orchestrator-kubernetes-name-prefix")
	envID, _ := plan.Args.Get("environment-id")
	backend, _ := plan.Args.Get("metadata-backend-url")
	p := &Process{Log: log, FenceCheck: time.Second, RetryFor: 10 * time.Minute,
		Catalog:      &SecretCatalog{Kube: kube, Namespace: namespace, Name: CatalogSecretName(backend, OrganizationID(envID))},
		Orchestrator: &Orchestrator{Kube: kube, MZ: mz, Namespace: namespace, Prefix: prefix, Args: plan.Args, Version: plan.Version, Pod: podName}}
	p.Replicas = &Controller{O: p.Orchestrator, Version: version, HydrateFor: hydrateFor}
	if podName == "" {
		return nil, fatal("HOSTNAME is not set")
	}
	return p, nil
}

// catalogCall runs a call to the catalog's store until it succeeds, as
// environmentd's persist client retries an unreachable consensus or blob
// store (it stays Initializing meanwhile). A fenced or undecodable catalog
// is returned at once: retrying changes neither.
func (p *Process) catalogCall(ctx context.Context, f func() error) error {
	var final error
	err := retry(ctx, p.Log, "catalog store call failed", time.Time{}, func() error {
		err := f()
		if errors.Is(err, errFenced) || errors.Is(err, errCorruptCatalog) {
			final = err
			return nil
		}
		return err
	})
	if final != nil {
		return final
	}
	return err
}

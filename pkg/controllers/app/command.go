// Package app is the controllers program: its flags and its start-up.
package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/cli"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	mzscheme "github.com/materializeinc/orchestratord/pkg/client/clientset/versioned/scheme"
	"github.com/materializeinc/orchestratord/pkg/controllers/balancer"
	"github.com/materializeinc/orchestratord/pkg/controllers/console"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
	"github.com/materializeinc/orchestratord/pkg/healthserver"
	"github.com/materializeinc/orchestratord/pkg/kubeclient"
	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/pkg/leaderelection/fence"
	"github.com/materializeinc/orchestratord/pkg/leaderelection/spread"
	"github.com/materializeinc/orchestratord/pkg/leaderelection/takeover"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade/gke"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade/noderemoval"
	"github.com/materializeinc/orchestratord/pkg/outage"
	"github.com/materializeinc/orchestratord/pkg/tracing"
)

// Options are the controllers' flags; their names are a contract that the
// Helm chart and other tooling rely on.
type Options struct {
	cli.Observability
	Kubeconfig              string
	KubernetesContext       string
	LeaderElectionNamespace string
	LeaderElectionIdentity  string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
	DrainTimeout            time.Duration
	SpreadLeadership        bool
	CrashFailover           bool
	TerminationMessagePath  string
	Controllers             []string
	MetricsAddress          string
	HealthAddress           string
	Profiling               bool
	Workers                 int
	CreateBalancers         bool
	// AllowExistingServiceAccounts is --allow-existing-service-accounts (materialize.Options).
	AllowExistingServiceAccounts bool
	CreateConsoles               bool
	BalancerdImage               string
	ConsoleImage                 string
	EnvironmentdClusterRole      string
	EnvironmentdURLTemplate      string
	EnvironmentdPoll             time.Duration
	KubeAPIQPS                   float32
	KubeAPIBurst                 int
	// Environment is how environmentd runs: upstream orchestratord's flags.
	Environment materialize.Config
	// GCPNodeUpgrade is upstream's GKE node upgrade rollout trigger, run
	// under the materialize controller's Lease when enabled.
	EnableGCPNodeUpgrade bool
	GCPNodeUpgrade       gke.Config
	// NodeRemovalTrigger rolls Materializes off nodes Karpenter or the
	// cluster autoscaler marked for removal (not upstream's; off by default).
	NodeRemovalTrigger bool
}

var knownControllers = []string{"materialize", "balancer", "console"}

// NewCommand returns the controllers root command.
func NewCommand() *cobra.Command {
	o := &Options{}
	cmd := cli.NewRoot("controllers", "Run the orchestratord reconcilers",
		"Runs the materialize, balancer and console reconcilers. Each holds its own\n"+
			"Lease, so several replicas run and exactly one reconciles each controller.\n"+
			"Every flag can also be set by ORCHESTRATORD_<FLAG_WITH_UNDERSCORES>.")
	fs := cmd.Flags()
	o.Observability.AddFlags(fs)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster configuration")
	fs.StringVar(&o.KubernetesContext, "kubernetes-context", "", "kubeconfig context (upstream orchestratord's flag): from --kubeconfig or the default kubeconfig locations, in-cluster when none has it; empty: --kubeconfig's current context")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the Leases; empty means the pod's namespace")
	fs.StringVar(&o.LeaderElectionIdentity, "leader-election-identity", "", "holder identity; empty means $POD_NAME, else hostname plus a random suffix")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a Lease is valid without renewal")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long a leader may go without renewing its Lease before that Lease's reconciler stops writing and rejoins the election")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", 2*time.Second, "how often to try to acquire or renew a Lease")
	fs.DurationVar(&o.DrainTimeout, "shutdown-drain-timeout", 30*time.Second,
		"on SIGTERM, how long in-flight reconciles may run to completion (their writes still fenced by the Lease) before they are cancelled")
	fs.BoolVar(&o.SpreadLeadership, "spread-leadership", true,
		"spread the Leases over the replicas (each leads at most ceil(leases/replicas)), handing one over gracefully when a replica leads two more than another")
	fs.BoolVar(&o.CrashFailover, "leader-election-crash-failover", true,
		"take a Lease over as soon as the kubelet reports its holder's process terminated, not when it expires (needs list and watch on pods in the holders' namespace; docs/leader-election.md)")
	fs.StringVar(&o.TerminationMessagePath, "termination-message-path", "/dev/termination-log",
		"the container's terminationMessagePath: this process writes its incarnation there, which the kubelet reports once it has terminated")
	fs.StringSliceVar(&o.Controllers, "controllers", knownControllers, "reconcilers to run, each named once")
	fs.StringVar(&o.MetricsAddress, "metrics-address", ":8080", "address of the Prometheus metrics endpoint")
	fs.StringVar(&o.HealthAddress, "health-address", ":8081", "address of /healthz (fails when a held Lease is overdue) and /readyz")
	fs.BoolVar(&o.Profiling, "profiling", false, "serve Go's profiles at /debug/pprof/ on the health address")
	fs.IntVar(&o.Workers, "workers", 2, "concurrent reconciles per controller")
	fs.BoolVar(&o.CreateBalancers, "create-balancers", true, "apply a Balancer for every Materialize (delete them when false)")
	fs.BoolVar(&o.AllowExistingServiceAccounts, "allow-existing-service-accounts", false,
		"let spec.serviceAccountName name a ServiceAccount the operator did not create, the Materialize's own name included (upstream's behaviour); when false, an account named after the Materialize is the operator's own, applied and owned by it")
	fs.BoolVar(&o.CreateConsoles, "create-consoles", true, "apply a Console for every Materialize (delete them when false)")
	fs.StringVar(&o.BalancerdImage, "balancerd-image", "", "balancerd image; empty means the environmentd image's registry and tag")
	fs.StringVar(&o.ConsoleImage, "console-image", "", "console image; empty means the environmentd image's registry and tag")
	fs.StringVar(&o.EnvironmentdClusterRole, "environmentd-cluster-role", materialize.DefaultEnvironmentdClusterRole,
		"ClusterRole granting environmentd its permissions, bound to its ServiceAccount in each Materialize's namespace by a RoleBinding; the controllers need bind on it (the chart's <release>-controllers-environmentd)")
	fs.StringVar(&o.EnvironmentdURLTemplate, "environmentd-url-template", "",
		"Go template of environmentd's internal HTTP base URL, with .Namespace .Name .ResourceID .Generation; empty means the generation Service's cluster DNS name")
	fs.DurationVar(&o.EnvironmentdPoll, "environmentd-poll-interval", 2*time.Second, "how often a rollout in progress asks environmentd for its leader status (an environmentd generation that answers slowly: after as long again as its answers took, and no sooner than ten times that when it was slow within 10 minutes before)")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", 50, "steady requests per second to the API server, per client: each controller writes with its own, and reads and elections share one")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 100, "burst of requests to the API server, per client (as --kube-api-qps)")
	o.Environment.AddFlags(fs)
	o.addNodeUpgradeFlags(fs)
	upstreamFlags.Install(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return Run(cmd.Context(), o)
	}
	return cmd
}

// addNodeUpgradeFlags adds upstream's flags of the GKE node upgrade
// rollout trigger.
func (o *Options) addNodeUpgradeFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.EnableGCPNodeUpgrade, "enable-gcp-node-upgrade-rollout-trigger", false,
		"trigger rollouts of Materializes when GKE upgrades the node pools under them (needs --cloud-provider=gcp; the watched pools should use blue-green upgrades; docs/node-upgrades.md)")
	fs.StringVar(&o.GCPNodeUpgrade.Subscription, "gcp-node-upgrade-notification-subscription", "",
		"Pub/Sub subscription receiving the GKE cluster's notifications, projects/{project}/subscriptions/{subscription} (required with --enable-gcp-node-upgrade-rollout-trigger)")
	fs.StringVar(&o.GCPNodeUpgrade.ClusterName, "gcp-cluster-name", "", "name of the GKE cluster this runs in (required with --enable-gcp-node-upgrade-rollout-trigger)")
	fs.StringVar(&o.GCPNodeUpgrade.ClusterLocation, "gcp-cluster-location", "",
		"location (region or zone) of the GKE cluster this runs in (required with --enable-gcp-node-upgrade-rollout-trigger)")
	fs.StringArrayVar(&o.GCPNodeUpgrade.WatchedNodePools, "gcp-node-upgrade-watched-node-pool", nil,
		"a node pool to watch for GKE node upgrades; repeatable; none means every pool")
	fs.BoolVar(&o.NodeRemovalTrigger, "node-removal-rollout-trigger", false,
		"trigger rollouts of Materializes with environmentd or clusterd pods on nodes tainted karpenter.sh/disrupted or ToBeDeletedByClusterAutoscaler (any cloud; docs/node-upgrades.md)")
}

func (o *Options) complete() error {
	for i, c := range o.Controllers {
		if !slices.Contains(knownControllers, c) {
			return fmt.Errorf("--controllers: unknown controller %q (want some of %s)", c, strings.Join(knownControllers, ","))
		}
		// A name given twice (the flag appends: the chart's list and an
		// extra argument) would run two campaigns for one Lease with one
		// identity, both leading it.
		if slices.Contains(o.Controllers[:i], c) {
			return fmt.Errorf("--controllers: %q is named twice", c)
		}
	}
	if len(o.Controllers) == 0 {
		return errors.New("--controllers: at least one controller is needed")
	}
	if o.EnvironmentdClusterRole == "" {
		return errors.New("--environmentd-cluster-role is required: environmentd's permissions")
	}
	if o.LeaderElectionNamespace == "" {
		o.LeaderElectionNamespace = cli.PodNamespace()
	}
	if o.LeaderElectionNamespace == "" {
		return errors.New("--leader-election-namespace is required outside a pod")
	}
	if o.LeaderElectionIdentity == "" {
		o.LeaderElectionIdentity = leaderelection.DefaultIdentity()
	}
	if o.Environment.OperatorNamespace == "" {
		o.Environment.OperatorNamespace = cli.PodNamespace()
	}
	if o.Environment.OperatorNamespace == "" {
		o.Environment.OperatorNamespace = o.LeaderElectionNamespace
	}
	// Upstream passes its tracing endpoint and Sentry settings on to
	// environmentd; the endpoint only when it is OTLP/gRPC, which is all
	// environmentd speaks, and here without credentials, which would sit
	// in every environment's pod spec for its tenant to read.
	if o.Tracing.Protocol == tracing.ProtocolGRPC {
		o.Environment.OpenTelemetryEndpoint = tracing.WithoutCredentials(o.Tracing.Endpoint)
	}
	o.Environment.SentryDSN, o.Environment.SentryEnvironment = o.Tracing.SentryDSN, o.Tracing.SentryEnvironment
	if err := o.Environment.Complete(); err != nil {
		return err
	}
	return o.completeNodeUpgrade()
}

// completeNodeUpgrade checks the GKE node upgrade trigger's flags as
// upstream does.
func (o *Options) completeNodeUpgrade() error {
	if o.NodeRemovalTrigger && !slices.Contains(o.Controllers, "materialize") {
		return errors.New("--node-removal-rollout-trigger requires the materialize controller (--controllers)")
	}
	if !o.EnableGCPNodeUpgrade {
		return nil
	}
	if o.Environment.CloudProvider != "gcp" {
		return errors.New("--enable-gcp-node-upgrade-rollout-trigger requires --cloud-provider=gcp")
	}
	// It runs under the materialize controller's Lease.
	if !slices.Contains(o.Controllers, "materialize") {
		return errors.New("--enable-gcp-node-upgrade-rollout-trigger requires the materialize controller (--controllers)")
	}
	for flag, v := range map[string]string{
		"--gcp-node-upgrade-notification-subscription": o.GCPNodeUpgrade.Subscription,
		"--gcp-cluster-name":                           o.GCPNodeUpgrade.ClusterName,
		"--gcp-cluster-location":                       o.GCPNodeUpgrade.ClusterLocation,
	} {
		if v == "" {
			return fmt.Errorf("%s is required when --enable-gcp-node-upgrade-rollout-trigger is set", flag)
		}
	}
	return o.GCPNodeUpgrade.Validate()
}

// environmentdURL turns --environmentd-url-template into the reconciler's hook.
func (o *Options) environmentdURL() (func(*v1alpha1.Materialize, string, uint64) string, error) {
	if o.EnvironmentdURLTemplate == "" {
		return nil, nil
	}
	tmpl, err := template.New("url").Option("missingkey=error").Parse(o.EnvironmentdURLTemplate)
	if err != nil {
		return nil, fmt.Errorf("--environmentd-url-template: %w", err)
	}
	return func(mz *v1alpha1.Materialize, id string, gen uint64) string {
		var b bytes.Buffer
		_ = tmpl.Execute(&b, map[string]any{"Namespace": mz.Namespace, "Name": mz.Name, "ResourceID": id, "Generation": gen})
		return b.String()
	}, nil
}

// spreadLeadership places the Leases among the replicas (package spread):
// it sets leCfg.Placement and runs the placement until ctx ends; the
// channel closes once it has.
func spreadLeadership(ctx context.Context, leCfg *leaderelection.Config, kube kubeclient.Interface, pod *metav1.OwnerReference,
	ctrls []*controller.Controller, synced func() bool, log *zap.Logger,
) <-chan struct{} {
	var names []string
	for _, c := range ctrls {
		names = append(names, leaderelection.LeaseName(c.Name()))
	}
	placement := spread.New(spread.Config{
		Client: kube, Namespace: leCfg.Namespace, Identity: leCfg.Identity, Pod: pod,
		LeaseDuration: leCfg.LeaseDuration, RenewDeadline: leCfg.RenewDeadline, RetryPeriod: leCfg.RetryPeriod,
		Logger: log,
	}, names)
	leCfg.Placement = placement
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Counted as a replica (and so handed Leases, which the others
		// leave to it) only once it can lead at once: caches synced, its
		// elections and their watches running.
		for !synced() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		placement.Run(ctx)
	}()
	return done
}

// Run starts the controllers and blocks until ctx ends and every lease is
// released. A lost lease is rejoined in process; a controller that fails
// stops them all with an error (the process exits non-zero).
func Run(ctx context.Context, o *Options) error {
	log, stop, err := o.Observability.Start(os.Stderr, "controllers")
	if err != nil {
		return err
	}
	defer stop()
	if err := o.complete(); err != nil {
		return err
	}
	envURL, err := o.environmentdURL()
	if err != nil {
		return err
	}
	cfg, err := cli.RESTConfig(o.Kubeconfig, o.KubernetesContext)
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	// The identity in the user agent attributes every request in the audit log.
	cfg.UserAgent = "orchestratord-controllers/" + o.LeaderElectionIdentity
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	// In-cluster traffic gains nothing from gzip, which costs the API server
	// CPU and this process a decompressor per watch stream.
	cfg.DisableCompression = true
	// No write leaves the process once its lease could have expired, and
	// none sent before is delivered after: a fence aborts the connections
	// of that Lease's controller (leaseClients).
	cfg.Wrap(fence.Transport)
	// Reads wait out an API server outage instead of failing, so the
	// informers have no backoff to sit out once it answers again.
	readsResent := outage.Resent()
	cfg.Wrap(outage.Wrap(outage.DefaultProbeInterval, readsResent))
	// The shared clients read (informers) and hold the elections; each
	// controller writes with its own (leaseClients).
	kube, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mz, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}

	registry := prometheus.NewRegistry()
	controller.RegisterClientMetrics(registry)
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), readsResent)
	if err := mzscheme.AddToScheme(scheme.Scheme); err != nil {
		return err
	}
	terms := leaderelection.NewTerms()
	clients := map[string]*leaseClients{}
	defer func() {
		for _, c := range clients {
			c.stopEvents()
		}
	}()
	for _, name := range o.Controllers {
		if clients[name], err = newLeaseClients(ctx, cfg, name, o.LeaderElectionIdentity, terms, log); err != nil {
			return err
		}
	}

	kubeInformers, mzInformers := controller.NewInformers(kube, mz)
	deps := controller.Deps{
		KubeInformers: kubeInformers,
		MZInformers:   mzInformers,
		Log:           log,
		Metrics:       controller.NewMetrics(registry),
		Workers:       o.Workers,
	}
	ctrls, alongside := o.newControllers(deps, clients, registry, envURL, log)
	// Informers run for the whole process, leader or not, so a new leader
	// starts with a warm cache.
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopInformers()
	synced := startInformers(informerCtx, deps)

	stopServers, err := serve(log, o, registry, leaderelection.NewHealthChecker(terms, o.RetryPeriod), synced)
	if err != nil {
		return err
	}
	defer stopServers()

	leCfg, pod := o.electionConfig(kube, registry, terms, log)
	log.Info("starting controllers", zap.Strings("controllers", o.Controllers), zap.String("identity", o.LeaderElectionIdentity),
		zap.String("leaseNamespace", o.LeaderElectionNamespace))
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	if o.SpreadLeadership {
		// Its presence Lease goes after the leases are released.
		spreadDone := spreadLeadership(runCtx, &leCfg, kube, pod, ctrls, synced, log)
		defer func() { stopAll(); <-spreadDone }()
	}
	errs := make(chan error, len(ctrls))
	for _, c := range ctrls {
		leCfg := leCfg
		leCfg.OnFence = func() { clients[c.Name()].abort(log, c.Name()) }
		go func() { errs <- campaign(runCtx, leCfg, c, alongside[c.Name()], log) }()
	}
	var first error
	for range ctrls {
		if err := <-errs; err != nil && first == nil {
			first = err
			log.Error("controller failed; stopping every controller and exiting", zap.Error(err))
			stopAll()
		}
	}
	if first != nil {
		return first
	}
	log.Info("controllers stopped; leases released")
	return nil
}

// newControllers builds the reconcilers of --controllers, each with its
// own clients (leaseClients), and what runs alongside each in its lead
// context (the materialize Lease's metrics and node triggers).
func (o *Options) newControllers(deps controller.Deps, clients map[string]*leaseClients, registry *prometheus.Registry,
	envURL func(*v1alpha1.Materialize, string, uint64) string, log *zap.Logger,
) (ctrls []*controller.Controller, alongside map[string]func(context.Context)) {
	mzInformers := deps.MZInformers
	alongside = map[string]func(context.Context){}
	for _, name := range o.Controllers {
		deps := deps
		deps.Kube, deps.MZ, deps.Dynamic, deps.Recorder = clients[name].kube, clients[name].mz, clients[name].dynamic, clients[name].recorder
		switch name {
		case "materialize":
			// Counted from the cache every replica keeps, leader or not.
			registry.MustRegister(materialize.ConditionsCollector(mzInformers.Materialize().V1alpha1().Materializes().Lister()))
			// Upstream's metrics follow the materialize Lease: true for
			// each term, from its start to its lead context's end.
			leading := &atomic.Bool{}
			registry.MustRegister(materialize.UpstreamMetricsCollector(mzInformers.Materialize().V1alpha1().Materializes().Lister(), leading.Load))
			alongside[name] = func(ctx context.Context) {
				leading.Store(true)
				<-ctx.Done()
				leading.Store(false)
			}
			waiting := materialize.NewWaiting()
			registry.MustRegister(waiting)
			ctrls = append(ctrls, materialize.New(deps, materialize.Options{
				Waiting: waiting,
				Config:  o.Environment,
				// Promotions are writes: the lease fence bounds them too.
				Leader:          clients[name].environmentd(),
				EnvironmentdURL: envURL, PollInterval: o.EnvironmentdPoll,
				CreateBalancers: o.CreateBalancers, CreateConsoles: o.CreateConsoles,
				AllowExistingServiceAccounts: o.AllowExistingServiceAccounts,
				BalancerdImage:               o.BalancerdImage, ConsoleImage: o.ConsoleImage,
				EnvironmentdClusterRole: o.EnvironmentdClusterRole,
			}))
			if run := o.nodeTriggers(deps.Kube, deps.MZ, log, registry); run != nil {
				alongside[name] = together(alongside[name], run)
			}
		case "balancer":
			env := &o.Environment
			ctrls = append(ctrls, balancer.New(deps, balancer.Config{
				Pods: env.BalancerdPods(), Certificates: env.Certificates(),
				SQLPort: env.BalancerdSQLPort, HTTPPort: env.BalancerdHTTPPort, InternalHTTPPort: env.BalancerdInternalHTTPPort,
				EnvironmentdSQLPort: env.SQLPort, EnvironmentdHTTPPort: env.HTTPPort,
			}))
		case "console":
			env := &o.Environment
			ctrls = append(ctrls, console.New(deps, console.Config{
				Pods: env.ConsolePods(), Certificates: env.Certificates(),
				HTTPPort: env.ConsoleHTTPPort, BalancerdHTTPPort: env.BalancerdHTTPPort,
				IngressNetworkPolicy: env.NetworkPoliciesIngressEnabled, IngressCIDRs: env.NetworkPoliciesIngressCIDRs,
			}))
		}
	}
	return ctrls, alongside
}

// startInformers starts the informers until ctx ends; the returned
// function reports whether every cache has synced.
func startInformers(ctx context.Context, deps controller.Deps) func() bool {
	deps.KubeInformers.Start(ctx.Done())
	deps.MZInformers.Start(ctx.Done())
	var synced atomic.Bool
	go func() {
		kubeSynced := deps.KubeInformers.WaitForCacheSync(ctx.Done())
		mzSynced := deps.MZInformers.WaitForCacheSync(ctx.Done())
		for _, ok := range kubeSynced {
			if !ok {
				return
			}
		}
		for _, ok := range mzSynced {
			if !ok {
				return
			}
		}
		synced.Store(true)
	}()
	return synced.Load
}

// electionConfig is the elections' configuration from the flags and the
// pod's environment (crash failover), and the pod's owner reference for the
// presence Lease (nil outside a pod).
func (o *Options) electionConfig(kube kubeclient.Interface, registry *prometheus.Registry, terms *leaderelection.Terms, log *zap.Logger) (leaderelection.Config, *metav1.OwnerReference) {
	leCfg := leaderelection.Config{
		Client: kube, Namespace: o.LeaderElectionNamespace, Identity: o.LeaderElectionIdentity,
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		Logger: log, Metrics: registry, Terms: terms, DrainTimeout: o.DrainTimeout,
		WatchHolderPods: o.CrashFailover,
	}
	var owner *metav1.OwnerReference
	if pod, uid := os.Getenv("POD_NAME"), os.Getenv("POD_UID"); pod != "" && uid != "" && cli.PodNamespace() == o.LeaderElectionNamespace {
		owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod, UID: types.UID(uid)}
	}
	if o.CrashFailover {
		// The pod's identity is the holder identity only as $POD_NAME.
		inc, err := takeover.NewIncarnation(cli.PodNamespace(), os.Getenv("POD_NAME"), os.Getenv("POD_UID"), o.TerminationMessagePath)
		switch {
		case err != nil:
			log.Info("crash failover off for this process: standbys take its Leases over at expiry", zap.String("reason", err.Error()))
		case inc.Pod != o.LeaderElectionIdentity:
			log.Info("crash failover off for this process: its identity is not its pod name")
		default:
			leCfg.Incarnation = inc
			log.Info("crash failover on", zap.String("incarnation", inc.ID))
		}
	}
	return leCfg, owner
}

// campaign runs one controller's elections until ctx ends. A lost lease
// (fenced: its renewals failed, say while the API server was away) ends the
// term, with every write of it stopped by the renew deadline; the
// controller then rejoins the election in process, its informers still
// warm, instead of exiting: a restarted container would wait out
// CrashLoopBackOff after repeated outages, and the caches would start cold.
// alongside, when not nil, runs with the controller in each term's lead
// context (the GKE node upgrade trigger with the materialize controller).
func campaign(ctx context.Context, cfg leaderelection.Config, c *controller.Controller, alongside func(context.Context), log *zap.Logger) error {
	lease := leaderelection.LeaseName(c.Name())
	lead := c.Run
	if alongside != nil {
		lead = together(c.Run, alongside)
	}
	for {
		err := leaderelection.Run(ctx, cfg, lease, lead)
		if !errors.Is(err, leaderelection.ErrLeadershipLost) || ctx.Err() != nil {
			return err
		}
		log.Warn("lease lost; rejoining the election", zap.String("lease", lease))
	}
}

// nodeTriggers returns what runs the enabled node triggers, nil when none
// is. Their Materialize writes go through the fenced clients with the
// materialize Lease's lead context, as the reconciler's; one Trigger, so
// its cooldown spans both.
func (o *Options) nodeTriggers(kube kubeclient.Interface, mz versioned.Interface, log *zap.Logger, reg prometheus.Registerer) func(context.Context) {
	if !o.EnableGCPNodeUpgrade && !o.NodeRemovalTrigger {
		return nil
	}
	var runs []func(context.Context)
	var enabled []string
	trigger := &nodeupgrade.Trigger{Kube: kube, MZ: mz, Log: log}
	if o.EnableGCPNodeUpgrade {
		enabled = append(enabled, nodeupgrade.TriggerGKENodePool)
		runs = append(runs, func(ctx context.Context) { gke.Run(ctx, o.GCPNodeUpgrade, trigger, log) })
	}
	if o.NodeRemovalTrigger {
		enabled = append(enabled, nodeupgrade.TriggerNodeRemoval)
		runs = append(runs, func(ctx context.Context) { noderemoval.Run(ctx, 0, trigger, log) })
	}
	trigger.Metrics = nodeupgrade.NewMetrics(reg, enabled...)
	return func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, run := range runs {
			wg.Go(func() { run(ctx) })
		}
		wg.Wait()
	}
}

// together runs run and alongside in one lead context and returns once
// both have: alongside is stopped when run returns, so that the term ends
// with nothing of it still running.
func together(run, alongside func(context.Context)) func(context.Context) {
	return func(ctx context.Context) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			alongside(ctx)
		}()
		run(ctx)
		cancel()
		<-done
	}
}

func serve(log *zap.Logger, o *Options, registry *prometheus.Registry, health *leaderelection.HealthChecker, synced func() bool) (func(), error) {
	servers, err := healthserver.Start(healthserver.Config{
		HealthAddress: o.HealthAddress, MetricsAddress: o.MetricsAddress, Profiling: o.Profiling,
		Healthz: health.Check,
		Readyz: func(*http.Request) error {
			if !synced() {
				return errors.New("caches not synced")
			}
			return nil
		},
		Metrics: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}),
	})
	if err != nil {
		return nil, err
	}
	go func() {
		for err := range servers.Errors() {
			log.Error("http server failed", zap.Error(err))
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		servers.Shutdown(ctx)
	}, nil
}

// upstreamFlags are upstream orchestratord's flags that are not this
// program's by the same name (most environment flags are: the same names
// and meanings).
var upstreamFlags = cli.UpstreamFlags{
	Aliases: map[string]string{
		"metrics-listen-address": "metrics-address",
		"create-console":         "create-consoles",
	},
	Refused: map[string]string{
		"profiling-listen-address":       "--profiling serves /debug/pprof/ on --health-address (the chart's controllers.profiling)",
		"webhook-listen-address":         webhookFlag,
		"webhook-service-name":           webhookFlag,
		"webhook-service-namespace":      webhookFlag,
		"webhook-service-port":           webhookFlag,
		"webhook-cert-reload-interval":   webhookFlag,
		"install-v1-crd":                 "the chart installs the CRDs, v1 and its conversion webhook always (crds.enabled)",
		"tls-ca":                         webhookFlag,
		"tls-cert":                       webhookFlag,
		"tls-key":                        webhookFlag,
		"additional-crd-columns":         "the chart puts the columns into the Materialize CRD: its value additionalMaterializeCRDColumns",
		"disable-license-key-checks":     "only environmentd versions below 26 took it, and this operator refuses them",
		"tokio-console-listen-addr":      cli.NoTokioConsole,
		"tokio-console-publish-interval": cli.NoTokioConsole,
		"tokio-console-retention":        cli.NoTokioConsole,
	},
	Ignored: map[string]string{
		"disable-authentication": "upstream orchestratord reads it nowhere; it does nothing here either",
	},
}

const webhookFlag = "the conversion webhook is its own program, cmd/webhook (the chart's webhook.* values)"

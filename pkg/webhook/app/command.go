// Package app is the webhook program: its flags and its start-up.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/materializeinc/orchestratord/pkg/cli"
	"github.com/materializeinc/orchestratord/pkg/crds"
	"github.com/materializeinc/orchestratord/pkg/kubeclient"
	"github.com/materializeinc/orchestratord/pkg/servingcert"
	"github.com/materializeinc/orchestratord/pkg/supervisor"
	"github.com/materializeinc/orchestratord/pkg/webhook"
)

// TLS modes of --tls-mode.
const (
	TLSModeSelfSigned  = "self-signed"
	TLSModeSecret      = "secret"
	TLSModeCertManager = "cert-manager"
)

// Options are the webhook's flags; their names are a contract that the Helm
// chart and other tooling rely on.
type Options struct {
	cli.Observability
	Kubeconfig         string
	KubernetesContext  string
	ListenAddress      string
	MetricsAddress     string
	HealthAddress      string
	Profiling          bool
	TLSMode            string
	TLSCertFile        string
	TLSKeyFile         string
	TLSCAFile          string
	TLSSANs            []string
	Namespace          string
	ServiceName        string
	ShutdownDrain      time.Duration
	ShutdownTimeout    time.Duration
	MaxRequestBytes    int64
	MaxInFlightMemory  int64
	MaxInFlightReviews int
	MaxConnections     int
	CertResync         time.Duration
	CAPropagation      time.Duration
	CAValidity         time.Duration
	CARenewBefore      time.Duration
	LeafValidity       time.Duration
	Supervise          bool
}

// NewCommand returns the webhook root command.
func NewCommand() *cobra.Command {
	o := &Options{}
	cmd := cli.NewRoot("webhook", "Serve the Materialize CRD conversion webhook",
		"Serves POST /convert (ConversionReview v1) for materialize.cloud Materialize\n"+
			"v1alpha1 <-> v1 over HTTPS. Every flag can also be set by\n"+
			"ORCHESTRATORD_<FLAG_WITH_UNDERSCORES>.")
	fs := cmd.Flags()
	o.Observability.AddFlags(fs)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster configuration")
	fs.StringVar(&o.KubernetesContext, "kubernetes-context", "", "kubeconfig context (upstream orchestratord's flag): from --kubeconfig or the default kubeconfig locations, in-cluster when none has it; empty: --kubeconfig's current context")
	fs.StringVar(&o.ListenAddress, "listen-address", ":9443", "HTTPS address of /convert")
	fs.StringVar(&o.MetricsAddress, "metrics-address", ":8080", "plain-HTTP address of /metrics (may equal --health-address)")
	fs.StringVar(&o.HealthAddress, "health-address", ":8081", "plain-HTTP address of /healthz and /readyz")
	fs.BoolVar(&o.Profiling, "profiling", false, "serve Go's profiles at /debug/pprof/ on the health address")
	fs.StringVar(&o.TLSMode, "tls-mode", TLSModeSelfSigned, "where the serving certificate comes from: self-signed, secret or cert-manager")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serving certificate (secret and cert-manager modes); re-read when it changes")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "serving key (secret and cert-manager modes); re-read when it changes")
	fs.StringVar(&o.TLSCAFile, "tls-ca-file", "", "secret mode: CA bundle to write into the CRD's caBundle (omit to manage caBundle yourself)")
	fs.StringSliceVar(&o.TLSSANs, "tls-san", nil, "self-signed mode: extra DNS names or IPs for the serving certificate")
	fs.StringVar(&o.Namespace, "namespace", "", "namespace of the webhook Service and CA Secret; empty means the pod's namespace")
	fs.StringVar(&o.ServiceName, "service-name", "orchestratord-webhook", "name of the webhook Service: the serving certificate's DNS names and the CA Secret (<name>-ca)")
	fs.DurationVar(&o.ShutdownDrain, "shutdown-drain", 10*time.Second, "after SIGTERM, how long to keep serving with /readyz failing")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "after the drain, how long in-flight requests may take to finish")
	fs.Int64Var(&o.MaxRequestBytes, "max-request-bytes", webhook.DefaultMaxRequestBytes, "largest ConversionReview body accepted")
	fs.Int64Var(&o.MaxInFlightMemory, "max-in-flight-memory", 0,
		"heap the ConversionReviews being read and answered may cost together (bodies as they arrive, then an estimate of their decoded cost); "+
			"beyond it, 429 with Retry-After; 0 means the Go memory limit less 64 MiB (192 MiB without a limit)")
	fs.IntVar(&o.MaxInFlightReviews, "max-in-flight-reviews", webhook.DefaultMaxInFlightReviews, "ConversionReviews answered at once; beyond it, 429 with Retry-After")
	fs.IntVar(&o.MaxConnections, "max-connections", webhook.DefaultMaxConnections,
		"open HTTPS connections; at the cap a new one replaces the oldest without a request in flight")
	fs.DurationVar(&o.CertResync, "cert-resync-period", servingcert.DefaultResync, "self-signed mode: how often the CA Secret and caBundle are re-read")
	fs.DurationVar(&o.CAPropagation, "ca-propagation-delay", servingcert.DefaultPropagationDelay, "self-signed mode: how long a new CA must be in the caBundle before leaves it signs are served")
	fs.DurationVar(&o.CAValidity, "ca-validity", servingcert.DefaultCAValidity, "self-signed mode: lifetime of a CA")
	fs.DurationVar(&o.CARenewBefore, "ca-renew-before", 0,
		"self-signed mode: how long before its expiry a CA is replaced (at least --cert-validity, less than --ca-validity); 0 means a third of --ca-validity")
	fs.DurationVar(&o.LeafValidity, "cert-validity", servingcert.DefaultLeafValidity, "self-signed mode: lifetime of a serving certificate; renewed after two thirds")
	fs.BoolVar(&o.Supervise, "supervise", false,
		"run the server as a child process on listening sockets this process holds, and start a new one at once if it crashes: "+
			"the API server's connections queue while it restarts instead of being refused")
	upstreamFlags.Install(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if o.Supervise && !supervisor.Supervised() {
			return supervise(cmd.Context(), o)
		}
		return Run(cmd.Context(), o)
	}
	return cmd
}

// supervise runs the webhook as a supervised child (package supervisor)
// with this process's arguments, on the three addresses' listeners.
func supervise(ctx context.Context, o *Options) error {
	log, err := o.Logging.New(os.Stderr)
	if err != nil {
		return err
	}
	log = log.Named("supervisor")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := childArgs(os.Args[1:], cli.MemoryLimit())
	if cli.MemoryLimit() > 0 {
		debug.SetMemoryLimit(supervisorMemory)
	}
	return supervisor.Run(ctx, supervisor.Config{
		Addresses: []string{o.ListenAddress, o.HealthAddress, o.MetricsAddress},
		Log:       log,
		Command: func() *exec.Cmd {
			cmd := exec.Command(self, args...)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			return cmd
		},
	})
}

// supervisorMemory is the supervisor's share of the container's memory: it
// holds the listeners and waits, a few MiB of heap. Its Go limit is that,
// and the server's --memory-limit is the container's less it, so that the
// two processes together stay under the container's limit.
const supervisorMemory = 16 << 20

// childArgs are the server's arguments: the supervisor's, and, with a
// memory limit, the container's limit less supervisorMemory (the last
// --memory-limit given wins).
func childArgs(args []string, memoryLimit int64) []string {
	if memoryLimit <= 0 {
		return args
	}
	return append(slices.Clone(args), fmt.Sprintf("--memory-limit=%d", max(memoryLimit-supervisorMemory, memoryLimit/2)))
}

// certSource is a TLS mode: it supplies certificates until its context ends.
type certSource interface {
	Run(ctx context.Context) error
	Ready() error
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// Run starts the webhook and blocks until ctx ends and it has drained.
func Run(ctx context.Context, o *Options) error {
	logger, stop, err := o.Observability.Start(os.Stderr, "webhook")
	if err != nil {
		return err
	}
	defer stop()
	if err := o.complete(); err != nil {
		return err
	}

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	metrics := webhook.NewMetrics(registry)
	memory := o.MaxInFlightMemory
	if memory <= 0 {
		memory = webhook.InFlightMemoryFor(debug.SetMemoryLimit(-1))
	}
	server := &webhook.Server{
		Log:             logger,
		ListenAddress:   o.ListenAddress,
		MetricsAddress:  o.MetricsAddress,
		HealthAddress:   o.HealthAddress,
		Profiling:       o.Profiling,
		ShutdownDrain:   o.ShutdownDrain,
		ShutdownTimeout: o.ShutdownTimeout,
		MaxConnections:  o.MaxConnections,
		Convert: &webhook.ConvertHandler{Log: logger, Metrics: metrics, MaxRequestBytes: o.MaxRequestBytes,
			MaxInFlightMemory: memory, MaxInFlightReviews: o.MaxInFlightReviews},
		Gatherer: registry,
		Metrics:  metrics,
		Listen:   supervisor.Listen,
	}
	source, err := o.certSource(logger.Named("tls"))
	if err != nil {
		return err
	}
	server.GetCertificate, server.Ready = source.GetCertificate, source.Ready
	registry.MustRegister(servingcert.ExpiryCollector(source.GetCertificate))
	logger.Info("starting webhook", zap.String("tlsMode", o.TLSMode), zap.String("namespace", o.Namespace),
		zap.String("service", o.ServiceName), zap.Int64("maxInFlightMemory", memory))

	// Certificates keep being maintained while the server drains.
	sourceCtx, stopSource := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSource()
	sourceErr := make(chan error, 1)
	go func() { sourceErr <- source.Run(sourceCtx) }()
	serverErr := make(chan error, 1)
	go func() { serverErr <- server.Run(ctx) }()
	select {
	case err := <-serverErr:
		return err
	case err := <-sourceErr:
		if err == nil {
			return <-serverErr
		}
		return fmt.Errorf("TLS (%s mode): %w", o.TLSMode, err)
	}
}

func (o *Options) complete() error {
	switch o.TLSMode {
	case TLSModeSelfSigned:
	case TLSModeSecret, TLSModeCertManager:
		if o.TLSCertFile == "" || o.TLSKeyFile == "" {
			return fmt.Errorf("--tls-mode=%s needs --tls-cert-file and --tls-key-file", o.TLSMode)
		}
	default:
		return fmt.Errorf("--tls-mode: %q is not one of %s, %s, %s", o.TLSMode, TLSModeSelfSigned, TLSModeSecret, TLSModeCertManager)
	}
	if o.Namespace == "" {
		o.Namespace = cli.PodNamespace()
	}
	if o.Namespace == "" && o.TLSMode == TLSModeSelfSigned {
		return errors.New("--namespace is required outside a pod in self-signed mode")
	}
	if o.ServiceName == "" {
		return errors.New("--service-name must not be empty")
	}
	if o.TLSMode == TLSModeSelfSigned && o.CARenewBefore != 0 {
		validity, leaf := o.CAValidity, o.LeafValidity
		if validity <= 0 {
			validity = servingcert.DefaultCAValidity
		}
		if leaf <= 0 {
			leaf = servingcert.DefaultLeafValidity
		}
		switch {
		case o.CARenewBefore < 0:
			return fmt.Errorf("--ca-renew-before=%s must not be negative", o.CARenewBefore)
		case o.CARenewBefore >= validity:
			// A new CA would be due at once, on every sync.
			return fmt.Errorf("--ca-renew-before=%s must be less than --ca-validity=%s", o.CARenewBefore, validity)
		case o.CARenewBefore < leaf:
			// Serving certificates never outlive their CA: closer to its
			// expiry they would be cut short, and reissued on every sync.
			return fmt.Errorf("--ca-renew-before=%s must be at least --cert-validity=%s", o.CARenewBefore, leaf)
		}
	}
	return nil
}

func (o *Options) certSource(log *zap.Logger) (certSource, error) {
	if o.TLSMode == TLSModeCertManager || (o.TLSMode == TLSModeSecret && o.TLSCAFile == "") {
		// cert-manager's CA injector, or the user, owns the caBundle: the
		// webhook never calls the API server, so it needs no client
		// configuration (and runs outside a cluster as well).
		return &servingcert.FileSource{CertFile: o.TLSCertFile, KeyFile: o.TLSKeyFile, Log: log}, nil
	}
	cfg, err := cli.RESTConfig(o.Kubeconfig, o.KubernetesContext)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	cfg.UserAgent = "orchestratord-webhook"
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	bundle := &servingcert.CRDCABundle{Client: ext, CRDName: crds.MaterializeCRDName}
	if o.TLSMode == TLSModeSecret {
		return &servingcert.FileSource{CertFile: o.TLSCertFile, KeyFile: o.TLSKeyFile, CAFile: o.TLSCAFile, Log: log,
			OnCABundle: func(ctx context.Context, b []byte) error {
				_, err := bundle.Ensure(ctx, b)
				return err
			}}, nil
	}
	kube, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dnsNames, ips := o.servingNames()
	return &servingcert.SelfSigned{
		Client: kube, Namespace: o.Namespace, SecretName: o.ServiceName + "-ca", CABundle: bundle,
		DNSNames: dnsNames, IPs: ips,
		CAValidity: o.CAValidity, CARenewBefore: o.CARenewBefore, LeafValidity: o.LeafValidity,
		PropagationDelay: o.CAPropagation, Resync: o.CertResync, Log: log,
	}, nil
}

// servingNames are the names the API server may use for the Service, plus
// --tls-san.
func (o *Options) servingNames() ([]string, []net.IP) {
	svc, ns := o.ServiceName, o.Namespace
	names := []string{svc + "." + ns + ".svc", svc, svc + "." + ns, svc + "." + ns + ".svc.cluster.local"}
	var ips []net.IP
	for _, san := range o.TLSSANs {
		if ip := net.ParseIP(strings.TrimSpace(san)); ip != nil {
			ips = append(ips, ip)
		} else if san != "" {
			names = append(names, strings.TrimSpace(san))
		}
	}
	return names, ips
}

// upstreamFlags are upstream orchestratord's webhook flags as this program
// takes them: the same meaning under upstream's name, or refused with what
// to use instead.
var upstreamFlags = cli.UpstreamFlags{
	Aliases: map[string]string{
		"metrics-listen-address":    "metrics-address",
		"webhook-listen-address":    "listen-address",
		"webhook-service-name":      "service-name",
		"webhook-service-namespace": "namespace",
		"tls-cert":                  "tls-cert-file",
		"tls-key":                   "tls-key-file",
		"tls-ca":                    "tls-ca-file",
	},
	Refused: map[string]string{
		"profiling-listen-address":       "--profiling serves /debug/pprof/ on --health-address (the chart's webhook.profiling)",
		"webhook-service-port":           "the chart points the CRD at its Service's port (webhook.service.port)",
		"webhook-cert-reload-interval":   "certificate files are re-read when they change; self-signed mode: --cert-resync-period",
		"install-v1-crd":                 "the chart installs the CRDs, v1 and this webhook always (crds.enabled)",
		"tokio-console-listen-addr":      cli.NoTokioConsole,
		"tokio-console-publish-interval": cli.NoTokioConsole,
		"tokio-console-retention":        cli.NoTokioConsole,
	},
}

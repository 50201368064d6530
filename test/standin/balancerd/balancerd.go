// Package balancerd is a TEST STAND-IN for balancerd, not Materialize: it
// parses balancerd's command line as the real program does (clap tables
// generated from upstream, package test/standin/clap) and then serves the
// probes the Balancer's Deployment uses and proxies pgwire and HTTPS
// connections to environmentd as balancerd's static resolver does.
package balancerd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/materializeinc/orchestratord/pkg/humantime"
	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/standin/clap"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

// Config is what balancerd serves and where it sends connections.
type Config struct {
	// PGWire, HTTPS and Internal are the listen addresses.
	PGWire, HTTPS, Internal string
	// TLSMode, TLSCert and TLSKey are --tls-mode and its files; TLS,
	// loaded by Boot, terminates clients' TLS (nil: plain).
	TLSMode, TLSCert, TLSKey string
	TLS                      *tls.Config
	// StaticAddr is pgwire's destination (--static-resolver-addr) and
	// HTTPSAddr the HTTPS port's (--https-resolver-template, which names
	// one host when clients give no SNI).
	StaticAddr, HTTPSAddr string
	// InternalTLS: connections to environmentd are TLS (--internal-tls).
	InternalTLS bool
	// DefaultConfigs are --default-config's KEY=value pairs.
	DefaultConfigs []string
	// Version is the balancerd release played: its answers to clients
	// when environmentd cannot be reached differ between releases.
	Version imageref.Version
	// lookupHost resolves environmentd's name for every connection (nil:
	// the system's resolver).
	lookupHost func(ctx context.Context, host string) ([]string, error)
}

// Check parses argv as balancerd of the given version does (its release
// line's command line, clap.Command.At) and returns what to serve.
func Check(version imageref.Version, argv []string, lookup func(string) (string, bool)) (*Config, error) {
	m, err := clap.Parse(clap.Balancerd.At(version.Major, version.Minor), argv, lookup)
	if err != nil {
		var ce *clap.Error
		if errors.As(err, &ce) {
			return nil, &standin.ExitError{Code: ce.ExitCode(), Message: ce.Error()}
		}
		return nil, &standin.ExitError{Code: 2, Message: err.Error()}
	}
	svc := m.Subcommand
	if svc == nil || svc.Command != "service" {
		return nil, &standin.ExitError{Code: 2, Message: "error: the stand-in plays only `balancerd service`"}
	}
	c := &Config{Version: version}
	c.PGWire, _ = svc.Get("pgwire-listen-addr")
	c.HTTPS, _ = svc.Get("https-listen-addr")
	c.Internal, _ = svc.Get("internal-http-listen-addr")
	c.StaticAddr, _ = svc.Get("static-resolver-addr")
	c.HTTPSAddr, _ = svc.Get("https-sni-resolver-template")
	internalTLS, _ := svc.Get("internal-tls")
	c.InternalTLS = internalTLS == "true"
	c.TLSMode, _ = svc.Get("tls-mode")
	c.TLSCert, _ = svc.Get("tls-cert")
	c.TLSKey, _ = svc.Get("tls-key")
	c.DefaultConfigs = svc.All("default-config")
	return c, nil
}

// injectProxyHeaderHTTP is the one dynamic config --default-config may set
// (upstream src/balancerd/src/dyncfgs.rs set_defaults).
const injectProxyHeaderHTTP = "balancerd_inject_proxy_protocol_header_http"

// Boot is balancerd's run up to serving, in its order (upstream
// src/balancerd/src/bin/balancerd.rs run, then BalancerService's new and
// serve in src/balancerd/src/lib.rs): the command line, the resolvers, the
// TLS arguments, the three listeners, the default configs, the
// certificate, the HTTPS resolver template. Every failure after the
// command line is balancerd's exit 101.
func Boot(ctx context.Context, version imageref.Version, argv []string, lookup func(string) (string, bool),
	resolve func(ctx context.Context, host string) error) (*Config, []net.Listener, error) {
	c, err := Check(version, argv, lookup)
	if err != nil {
		return nil, nil, err
	}
	if err := Resolvers(ctx, version, argv, lookup, resolve); err != nil {
		return nil, nil, err
	}
	if c.TLSMode == "disable" && c.TLSCert != "" {
		return nil, nil, fatal("cannot specify --tls-mode=disable and --tls-cert simultaneously")
	}
	if c.TLSMode == "disable" && c.TLSKey != "" {
		return nil, nil, fatal("cannot specify --tls-mode=disable and --tls-key simultaneously")
	}
	var lns []net.Listener
	fail := func(err error) (*Config, []net.Listener, error) {
		for _, ln := range lns {
			ln.Close()
		}
		return nil, nil, err
	}
	for _, addr := range []string{c.PGWire, c.HTTPS, c.Internal} {
		ln, err := standin.Listen(addr)
		if errors.Is(err, syscall.EADDRINUSE) {
			return fail(fatal("Address already in use (os error 98)")) // std's io::Error
		}
		if err != nil {
			return fail(fatal("%v", err))
		}
		lns = append(lns, ln)
	}
	for _, kv := range c.DefaultConfigs {
		k, v, _ := strings.Cut(kv, "=")
		if k != injectProxyHeaderHTTP {
			return fail(fatal("Invalid default config value %s", k))
		}
		if v != "true" && v != "false" {
			return fail(fatal("provided string was not `true` or `false`"))
		}
	}
	if c.TLSMode == "require" {
		pair, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return fail(fatal("%v", err))
		}
		c.TLS = standin.ServerTLS(pair)
	}
	// Split at the first colon, the port a u16.
	_, port, ok := strings.Cut(c.HTTPSAddr, ":")
	if !ok {
		return fail(panicked("expected port in https_addr_template"))
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		kind := "InvalidDigit"
		switch {
		case port == "":
			kind = "Empty"
		case errors.Is(err, strconv.ErrRange):
			kind = "PosOverflow"
		}
		return fail(panicked("unexpected port: ParseIntError { kind: %s }", kind))
	}
	return c, lns, nil
}

// Resolvers is what balancerd's run checks of its resolvers before it
// serves (upstream src/balancerd/src/bin/balancerd.rs): exactly one of the
// static and Frontegg resolvers, and a static address that resolves within
// --static-resolver-addr-timeout (retried, 250 ms doubling to 2 s). A
// release without that flag (before 26.37, upstream 67ff56078f) looks the
// address up once and panics if it does not resolve.
func Resolvers(ctx context.Context, version imageref.Version, argv []string, lookup func(string) (string, bool), resolve func(ctx context.Context, host string) error) error {
	m, err := clap.Parse(clap.Balancerd.At(version.Major, version.Minor), argv, lookup)
	if err != nil {
		return err
	}
	svc := m.Subcommand
	static, hasStatic := svc.Get("static-resolver-addr")
	_, hasFrontegg := svc.Get("frontegg-resolver-template")
	if hasStatic == hasFrontegg {
		return fatal("exactly one of --static-resolver-addr or --frontegg-resolver-template must be present")
	}
	if !hasStatic {
		return nil
	}
	// clap has parsed it with humantime::parse_duration.
	raw, retries := svc.Get("static-resolver-addr-timeout")
	if !retries {
		if err := resolveAddr(ctx, static, resolve); err != nil {
			if errors.Is(err, ErrNoAddresses) {
				return panicked("%s did not resolve to any addresses", static)
			}
			return panicked("could not resolve %s", static)
		}
		return nil
	}
	timeout, err := humantime.Parse(raw)
	if err != nil {
		return &standin.ExitError{Code: 2, Message: fmt.Sprintf("error: invalid value '%s' for '--static-resolver-addr-timeout <STATIC_RESOLVER_ADDR_TIMEOUT>': %v", raw, err)}
	}
	// mz_ore's Retry: the backoff doubles from 250 ms up to 2 s, the last
	// one shortened so that one more attempt comes at the deadline.
	start := time.Now()
	next := 250 * time.Millisecond
	for {
		elapsed := time.Since(start)
		last := elapsed > timeout
		if !last && elapsed+next > timeout {
			next = timeout - elapsed
		}
		err := resolveAddr(ctx, static, resolve)
		if err == nil {
			return nil
		}
		if last || ctx.Err() != nil {
			return fatal("static resolver address %s did not resolve within %s: %v", static, rustDuration(timeout), err)
		}
		select {
		case <-time.After(next):
		case <-ctx.Done():
		}
		next = min(2*next, 2*time.Second)
	}
}

// rustDuration is Rust's Debug of a Duration ("60s", "1.5s", "300ms").
func rustDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
	case d >= time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + "ms"
	case d >= time.Microsecond:
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', -1, 64) + "µs"
	}
	return strconv.Itoa(int(d)) + "ns"
}

// resolveAddr is tokio's lookup_host of "host:port".
func resolveAddr(ctx context.Context, addr string, resolve func(ctx context.Context, host string) error) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("could not resolve %s: invalid socket address", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("could not resolve %s: invalid port value", addr)
	}
	if err := resolve(ctx, host); err != nil {
		return fmt.Errorf("could not resolve %s: %w", addr, err)
	}
	return nil
}

// ErrNoAddresses is what a resolver returns for a host without addresses.
var ErrNoAddresses = errors.New("did not resolve to any addresses")

// LookupHost resolves host with the system's resolver, failing (with
// ErrNoAddresses) when it has no address.
func LookupHost(ctx context.Context, host string) error {
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err == nil && len(addrs) == 0 {
		err = fmt.Errorf("%s %w", host, ErrNoAddresses)
	}
	return err
}

func fatal(format string, a ...any) *standin.ExitError {
	return &standin.ExitError{Code: 101, Message: "balancer: fatal: " + fmt.Sprintf(format, a...)}
}

// panicked is a Rust panic of balancerd's main thread (the message only
// approximates the panic report around it).
func panicked(format string, a ...any) *standin.ExitError {
	return &standin.ExitError{Code: 101, Message: "thread 'main' panicked: " + fmt.Sprintf(format, a...)}
}

// Version is the balancerd version the stand-in plays: STANDIN_VERSION from
// its image's environment, else the newest release line of its table
// (standin.Version).
func Version(lookup func(string) (string, bool)) (imageref.Version, error) {
	return standin.Version(clap.Balancerd, lookup)
}

// Shutdown is what balancerd does once told to stop (SIGTERM): it serves
// on for ListenWait, then closes its listeners and waits up to
// ConnectionWait for the connections still open (upstream
// src/balancerd/src/dyncfgs.rs: balancerd_sigterm_listen_wait, 60 s, and
// balancerd_sigterm_connection_wait, 9 min; neither can be set from the
// command line). A pod's grace period (30 s by default) ends it before.
type Shutdown struct{ ListenWait, ConnectionWait time.Duration }

// UpstreamShutdown is balancerd's defaults.
var UpstreamShutdown = Shutdown{ListenWait: 60 * time.Second, ConnectionWait: 9 * time.Minute}

// Run boots as balancerd of Version(lookup) and serves until ctx ends, then
// shuts down as balancerd does.
func Run(ctx context.Context, log *slog.Logger, argv []string, lookup func(string) (string, bool)) error {
	version, err := Version(lookup)
	if err != nil {
		return err
	}
	cfg, lns, err := Boot(ctx, version, argv, lookup, LookupHost)
	if err != nil {
		return err
	}
	log.Info("TEST STAND-IN balancerd (not Materialize) accepted its command line",
		"version", version.String(), "pgwire", cfg.PGWire, "https", cfg.HTTPS, "internal-http", cfg.Internal,
		"tls", cfg.TLS != nil, "static-resolver-addr", cfg.StaticAddr, "https-resolver", cfg.HTTPSAddr, "internal-tls", cfg.InternalTLS)
	return cfg.Serve(ctx, log, lns, UpstreamShutdown)
}

// Probes is the internal HTTP port's router: the probes and /metrics,
// axum's GET routes (HEAD too), 405 for another method, 404 for another
// path. Its one metric is balancerd's uptime gauge.
func Probes(version imageref.Version, started time.Time) http.Handler {
	// "GET /path" also serves HEAD, and answers another method 405 with
	// an Allow header, as axum's get routes do.
	probes := http.NewServeMux()
	probes.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP mz_balancer_metadata_seconds server uptime, labels are build metadata\n"+
			"# TYPE mz_balancer_metadata_seconds gauge\n"+
			"mz_balancer_metadata_seconds{build_type=\"release\",version=\"%s\"} %g\n", version, time.Since(started).Seconds())
	})
	for path, answer := range map[string]string{"/api/readyz": "ready", "/api/livez": "Liveness check successful!"} {
		probes.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(answer)) })
	}
	return probes
}

// Serve serves the pgwire, HTTPS and internal listeners Boot opened until
// ctx ends, then shuts down as balancerd does.
func (c *Config) Serve(ctx context.Context, log *slog.Logger, lns []net.Listener, shutdown Shutdown) error {
	var open sync.WaitGroup
	errc := make(chan error, len(lns))
	go func() { errc <- accept(lns[0], &open, func(conn net.Conn) { c.proxyPGWire(log, conn) }) }()
	go func() { errc <- accept(lns[1], &open, func(conn net.Conn) { c.proxyHTTPS(log, conn) }) }()
	go func() { errc <- standin.ServeHTTP(lns[2], Probes(c.Version, time.Now())) }()
	<-ctx.Done()
	log.Warn(fmt.Sprintf("received signal TERM - delaying for %v!", shutdown.ListenWait))
	time.Sleep(shutdown.ListenWait)
	log.Warn("sigterm delay complete, dropping server handles")
	closed, cancel := context.WithCancel(context.Background())
	cancel()
	err := standin.CloseAndWait(closed, lns, errc)
	drained := make(chan struct{})
	go func() { open.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(shutdown.ConnectionWait):
	}
	return err
}

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
	// TLS terminates clients' TLS (--tls-mode=require); nil: plain.
	TLS *tls.Config
	// StaticAddr is pgwire's destination (--static-resolver-addr) and
	// HTTPSAddr the HTTPS port's (--https-resolver-template, which names
	// one host when clients give no SNI).
	StaticAddr, HTTPSAddr string
	// InternalTLS: connections to environmentd are TLS (--internal-tls).
	InternalTLS bool
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
	c := &Config{}
	c.PGWire, _ = svc.Get("pgwire-listen-addr")
	c.HTTPS, _ = svc.Get("https-listen-addr")
	c.Internal, _ = svc.Get("internal-http-listen-addr")
	c.StaticAddr, _ = svc.Get("static-resolver-addr")
	c.HTTPSAddr, _ = svc.Get("https-sni-resolver-template")
	internalTLS, _ := svc.Get("internal-tls")
	c.InternalTLS = internalTLS == "true"
	if mode, _ := svc.Get("tls-mode"); mode == "require" {
		cert, _ := svc.Get("tls-cert")
		key, _ := svc.Get("tls-key")
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, &standin.ExitError{Code: 101, Message: "balancer: fatal: " + err.Error()}
		}
		c.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	return c, nil
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
	deadline := time.Now().Add(timeout)
	for backoff := 250 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		err := resolveAddr(ctx, static, resolve)
		if err == nil {
			return nil
		}
		if time.Now().Add(backoff).After(deadline) || ctx.Err() != nil {
			return fatal("static resolver address %s did not resolve within %v: %v", static, timeout, err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
	}
}

// resolveAddr is tokio's lookup_host of "host:port".
func resolveAddr(ctx context.Context, addr string, resolve func(ctx context.Context, host string) error) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("could not resolve %s: invalid socket address", addr)
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

// Run checks argv as balancerd of Version(lookup) and serves until ctx ends.
func Run(ctx context.Context, log *slog.Logger, argv []string, lookup func(string) (string, bool)) error {
	version, err := Version(lookup)
	if err != nil {
		return err
	}
	cfg, err := Check(version, argv, lookup)
	if err != nil {
		return err
	}
	if err := Resolvers(ctx, version, argv, lookup, LookupHost); err != nil {
		return err
	}
	log.Info("TEST STAND-IN balancerd (not Materialize) accepted its command line",
		"version", version.String(), "pgwire", cfg.PGWire, "https", cfg.HTTPS, "internal-http", cfg.Internal,
		"tls", cfg.TLS != nil, "static-resolver-addr", cfg.StaticAddr, "https-resolver", cfg.HTTPSAddr, "internal-tls", cfg.InternalTLS)
	probes := http.NewServeMux()
	for _, p := range []string{"/api/readyz", "/api/livez"} {
		probes.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	}
	type port struct {
		addr  string
		serve func(net.Listener) error
	}
	var lns []net.Listener
	errc := make(chan error, 3)
	for _, p := range []port{
		{cfg.PGWire, func(ln net.Listener) error { return accept(ln, func(c net.Conn) { cfg.proxyPGWire(log, c) }) }},
		{cfg.HTTPS, func(ln net.Listener) error { return accept(ln, func(c net.Conn) { cfg.proxyHTTPS(log, c) }) }},
		{cfg.Internal, func(ln net.Listener) error { return standin.ServeHTTP(ln, probes) }},
	} {
		if p.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			closed, cancel := context.WithCancel(context.Background())
			cancel()
			_ = standin.CloseAndWait(closed, lns, errc)
			return fmt.Errorf("listening on %s: %w", p.addr, err)
		}
		lns = append(lns, ln)
		go func() { errc <- p.serve(ln) }()
	}
	return standin.CloseAndWait(ctx, lns, errc)
}

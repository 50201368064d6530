// Package balancerd is a TEST STAND-IN for balancerd, not Materialize: it
// parses balancerd's command line as the real program does (clap tables
// generated from upstream, package test/standin/clap) and then serves the
// probes the Balancer's Deployment uses, and accepts connections on its
// pgwire and HTTPS ports.
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

// Check parses argv as balancerd of the given version does (its release
// line's command line, clap.Command.At) and returns the addresses to serve.
func Check(version imageref.Version, argv []string, lookup func(string) (string, bool)) (pgwire, https, internal string, tlsConfig *tls.Config, err error) {
	m, err := clap.Parse(clap.Balancerd.At(version.Major, version.Minor), argv, lookup)
	if err != nil {
		var ce *clap.Error
		if errors.As(err, &ce) {
			return "", "", "", nil, &standin.ExitError{Code: ce.ExitCode(), Message: ce.Error()}
		}
		return "", "", "", nil, &standin.ExitError{Code: 2, Message: err.Error()}
	}
	svc := m.Subcommand
	if svc == nil || svc.Command != "service" {
		return "", "", "", nil, &standin.ExitError{Code: 2, Message: "error: the stand-in plays only `balancerd service`"}
	}
	pgwire, _ = svc.Get("pgwire-listen-addr")
	https, _ = svc.Get("https-listen-addr")
	internal, _ = svc.Get("internal-http-listen-addr")
	if mode, _ := svc.Get("tls-mode"); mode == "require" {
		cert, _ := svc.Get("tls-cert")
		key, _ := svc.Get("tls-key")
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return "", "", "", nil, &standin.ExitError{Code: 101, Message: "balancer: fatal: " + err.Error()}
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	return pgwire, https, internal, tlsConfig, nil
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
	pgwire, https, internal, tlsConfig, err := Check(version, argv, lookup)
	if err != nil {
		return err
	}
	if err := Resolvers(ctx, version, argv, lookup, LookupHost); err != nil {
		return err
	}
	log.Info("TEST STAND-IN balancerd (not Materialize) accepted its command line",
		"version", version.String(), "pgwire", pgwire, "https", https, "internal-http", internal, "tls", tlsConfig != nil)
	probes := http.NewServeMux()
	for _, p := range []string{"/api/readyz", "/api/livez"} {
		probes.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	}
	type port struct {
		addr string
		http http.Handler // nil: accept and close connections
		tls  *tls.Config  // only the HTTPS port terminates TLS
	}
	var lns []net.Listener
	errc := make(chan error, 3)
	for _, p := range []port{{addr: pgwire}, {addr: https, tls: tlsConfig}, {addr: internal, http: probes}} {
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
		if p.tls != nil {
			ln = tls.NewListener(ln, p.tls)
		}
		go func() {
			if p.http != nil {
				errc <- standin.ServeHTTP(ln, p.http)
				return
			}
			standin.AcceptAndClose(ln) // the stand-in proxies nothing
			errc <- nil
		}()
	}
	return standin.CloseAndWait(ctx, lns, errc)
}

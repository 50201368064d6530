package balancerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/balancer"
	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/standin/clap"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

// newest is the newest release line of balancerd's table.
var newest = func() imageref.Version {
	v, err := Version(func(string) (string, bool) { return "", false })
	if err != nil {
		panic(err)
	}
	return v
}()

func TestAcceptsTheBalancersCommandLine(t *testing.T) {
	args, err := balancer.DefaultConfig().Args(v1alpha1.BalancerSpec{StaticRouting: &v1alpha1.StaticRoutingConfig{
		EnvironmentdNamespace: "envs", EnvironmentdServiceName: "mzabc-environmentd"}})
	if err != nil {
		t.Fatal(err)
	}
	// Every release line the operator runs.
	for _, line := range clap.Balancerd.Versions {
		v := imageref.MustParseVersion(line + ".0")
		cfg, err := Check(v, args, nil)
		if err != nil {
			t.Fatalf("balancerd %s refuses %q: %v", v, args, err)
		}
		want := Config{PGWire: "0.0.0.0:6875", HTTPS: "0.0.0.0:6876", Internal: "0.0.0.0:8080", TLSMode: "disable", Version: v,
			StaticAddr: "mzabc-environmentd.envs.svc.cluster.local:6875", HTTPSAddr: "mzabc-environmentd.envs.svc.cluster.local:6876"}
		if !reflect.DeepEqual(*cfg, want) {
			t.Errorf("%s: %+v, want %+v", v, *cfg, want)
		}
	}
}

func TestRefusesWhatBalancerdRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pgwire-listen-addr=0.0.0.0:6875"}, "error: unexpected argument '--pgwire-listen-addr' found"},
		{[]string{"service", "--no-such-flag"}, "error: unexpected argument '--no-such-flag' found"},
		{[]string{"service", "--log-format=json"}, "error: unexpected argument '--log-format' found"},
	} {
		_, err := Check(newest, c.args, nil)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Check(%q) = %v, want %q", c.args, err, c.want)
		}
	}
}

// balancerd refuses to start, in clap's words, when a value does not parse
// as its Rust type.
func TestRefusesValuesBalancerdRefuses(t *testing.T) {
	base := []string{"service", "--pgwire-listen-addr=0.0.0.0:6875", "--https-listen-addr=0.0.0.0:6876",
		"--internal-http-listen-addr=0.0.0.0:8080", "--static-resolver-addr=x:6875", "--https-resolver-template=x:6876"}
	if _, err := Check(newest, base, nil); err != nil {
		t.Fatalf("the base command line is refused: %v", err)
	}
	for _, c := range []struct{ arg, want string }{
		// std's SocketAddr takes no host name.
		{"--pgwire-listen-addr=localhost:6875", "error: invalid value 'localhost:6875' for '--pgwire-listen-addr <HOST:PORT>': invalid socket address syntax"},
		{"--internal-http-listen-addr=0.0.0.0", "error: invalid value '0.0.0.0' for '--internal-http-listen-addr <HOST:PORT>': invalid socket address syntax"},
		{"--static-resolver-addr-timeout=30", "error: invalid value '30' for '--static-resolver-addr-timeout <STATIC_RESOLVER_ADDR_TIMEOUT>': time unit needed, for example 30sec or 30ms"},
		{"--config-sync-timeout=1d2", "error: invalid value '1d2' for '--config-sync-timeout <CONFIG_SYNC_TIMEOUT>': time unit needed, for example 2sec or 2ms"},
		{"--default-config=x", "error: invalid value 'x' for '--default-config <DEFAULT_CONFIG>': invalid KEY=value: no `=` found in `x`"},
	} {
		_, err := Check(newest, append(append([]string(nil), base...), c.arg), nil)
		var e *standin.ExitError
		if !errors.As(err, &e) || e.Code != 2 || e.Message != c.want {
			t.Errorf("%s: %v, want exit 2 %q", c.arg, err, c.want)
		}
	}
	// Options of the top-level command, before the subcommand.
	_, err := Check(newest, append([]string{"--startup-log-filter=info,[x"}, base...), nil)
	if err == nil || err.Error() != "error: invalid value 'info,[x' for '--startup-log-filter <FILTER>': invalid filter directive" {
		t.Errorf("a bad --startup-log-filter: %v", err)
	}
}

// balancerd's run: exactly one resolver, and a static address that resolves
// before the timeout.
func TestResolversAsBalancerdChecksThem(t *testing.T) {
	base := []string{"service", "--pgwire-listen-addr=0.0.0.0:6875", "--https-listen-addr=0.0.0.0:6876",
		"--internal-http-listen-addr=0.0.0.0:8080", "--https-resolver-template=x:6876"}
	known := func(_ context.Context, host string) error {
		if host == "mzabc-environmentd.envs.svc.cluster.local" {
			return nil
		}
		return errors.New("no such host")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--static-resolver-addr=mzabc-environmentd.envs.svc.cluster.local:6875"}, ""},
		{[]string{"--static-resolver-addr=nowhere:6875", "--static-resolver-addr-timeout=300ms"},
			"balancer: fatal: static resolver address nowhere:6875 did not resolve within 300ms: could not resolve nowhere:6875: no such host"},
		{[]string{"--static-resolver-addr=noport", "--static-resolver-addr-timeout=1ms"}, "invalid socket address"},
		// tokio's lookup_host takes a u16 port.
		{[]string{"--static-resolver-addr=mzabc-environmentd.envs.svc.cluster.local:70000", "--static-resolver-addr-timeout=1ms"}, "could not resolve mzabc-environmentd.envs.svc.cluster.local:70000: invalid port value"},
		{[]string{"--cancellation-resolver-dir=/tmp", "--frontegg-resolver-template=x", "--frontegg-api-token-url=u", "--frontegg-admin-role=r", "--frontegg-jwk=k"}, ""},
		{[]string{"--cancellation-resolver-dir=/tmp"}, "balancer: fatal: exactly one of --static-resolver-addr or --frontegg-resolver-template must be present"},
	} {
		err := Resolvers(context.Background(), newest, append(append([]string(nil), base...), c.args...), nil, known)
		if (c.want == "" && err != nil) || (c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want))) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// --static-resolver-addr-timeout is new in 26.37 (upstream 67ff56078f): an
// older balancerd refuses it as clap refuses any unknown flag and does not
// read its environment variable; it looks the static address up once and
// panics if that fails.
func TestStaticResolverAddrTimeoutIsNewIn2637(t *testing.T) {
	base := []string{"service", "--pgwire-listen-addr=0.0.0.0:6875", "--https-listen-addr=0.0.0.0:6876",
		"--internal-http-listen-addr=0.0.0.0:8080", "--https-resolver-template=x:6876", "--static-resolver-addr=x:6875"}
	withTimeout := append(append([]string(nil), base...), "--static-resolver-addr-timeout=1s")
	badEnv := func(k string) (string, bool) { return "soon", k == "STATIC_RESOLVER_ADDR_TIMEOUT" }
	for _, c := range []struct {
		version string
		args    []string
		lookup  func(string) (string, bool)
		want    string
	}{
		{"26.36.0", withTimeout, nil, "error: unexpected argument '--static-resolver-addr-timeout' found"},
		{"26.1.0", withTimeout, nil, "error: unexpected argument '--static-resolver-addr-timeout' found"},
		{"26.36.0", base, badEnv, ""},
		{"26.37.0-rc.1", withTimeout, nil, ""},
		{"26.37.0", base, badEnv, "error: invalid value 'soon' for '--static-resolver-addr-timeout <STATIC_RESOLVER_ADDR_TIMEOUT>': expected number at 0"},
		{"27.0.0", withTimeout, nil, ""},
	} {
		_, err := Check(imageref.MustParseVersion(c.version), c.args, c.lookup)
		var e *standin.ExitError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("balancerd %s refuses %q: %v", c.version, c.args, err)
		case c.want != "" && (!errors.As(err, &e) || e.Code != 2 || e.Message != c.want):
			t.Errorf("balancerd %s with %q: %v, want exit 2 %q", c.version, c.args, err, c.want)
		}
	}

	nowhere := func(_ context.Context, host string) error { return errors.New("no such host") }
	empty := func(_ context.Context, host string) error { return fmt.Errorf("%s %w", host, ErrNoAddresses) }
	for _, c := range []struct {
		resolve func(context.Context, string) error
		want    string
	}{
		{nowhere, "thread 'main' panicked: could not resolve x:6875"},
		{empty, "thread 'main' panicked: x:6875 did not resolve to any addresses"},
	} {
		err := Resolvers(context.Background(), imageref.MustParseVersion("26.36.0"), base, nil, c.resolve)
		var e *standin.ExitError
		if !errors.As(err, &e) || e.Code != 101 || e.Message != c.want {
			t.Errorf("balancerd 26.36: %v, want exit 101 %q", err, c.want)
		}
	}
	resolved := func(context.Context, string) error { return nil }
	if err := Resolvers(context.Background(), imageref.MustParseVersion("26.36.0"), base, nil, resolved); err != nil {
		t.Errorf("balancerd 26.36 with a resolving address: %v", err)
	}
}

// The stand-in plays the version its image names, else the newest.
func TestVersionFromTheImage(t *testing.T) {
	v, err := Version(func(k string) (string, bool) { return "26.5.0", k == "STANDIN_VERSION" })
	if err != nil || v.String() != "26.5.0" {
		t.Errorf("STANDIN_VERSION=26.5.0: %v, %v", v, err)
	}
	if want := clap.Balancerd.Versions[len(clap.Balancerd.Versions)-1] + ".0"; newest.String() != want {
		t.Errorf("without STANDIN_VERSION: %v, want %s", newest, want)
	}
	if _, err := Version(func(k string) (string, bool) { return "v26", k == "STANDIN_VERSION" }); err == nil {
		t.Errorf("STANDIN_VERSION=v26 accepted")
	}
}

// After its command line, balancerd boots in its order and exits 101 on
// what it cannot serve with (upstream balancerd.rs run, lib.rs
// BalancerService::new and serve).
func TestBootRefusesWhatBalancerdCannotServeWith(t *testing.T) {
	busy := listen(t)
	base := func(extra ...string) []string {
		return append([]string{"service", "--pgwire-listen-addr=127.0.0.1:0", "--https-listen-addr=127.0.0.1:0",
			"--internal-http-listen-addr=127.0.0.1:0", "--static-resolver-addr=x:6875", "--https-resolver-template=x:6876"}, extra...)
	}
	resolves := func(context.Context, string) error { return nil }
	for _, c := range []struct {
		args []string
		want string
	}{
		{base(), ""},
		{base("--default-config=balancerd_inject_proxy_protocol_header_http=true"), ""},
		{base("--tls-mode=disable", "--tls-cert=/c", "--tls-key=/k"), "balancer: fatal: cannot specify --tls-mode=disable and --tls-cert simultaneously"},
		{base("--tls-mode=require", "--tls-cert=/nonexistent.crt", "--tls-key=/nonexistent.key"), "balancer: fatal: open /nonexistent.crt"},
		{append(base(), "--pgwire-listen-addr="+busy.Addr().String()), "balancer: fatal: Address already in use (os error 98)"},
		{base("--default-config=balancerd_sigterm_listen_wait=1s"), "balancer: fatal: Invalid default config value balancerd_sigterm_listen_wait"},
		{base("--default-config=balancerd_inject_proxy_protocol_header_http=yes"), "balancer: fatal: provided string was not `true` or `false`"},
		{append(base(), "--https-resolver-template=x"), "thread 'main' panicked: expected port in https_addr_template"},
		{append(base(), "--https-resolver-template=x:http"), "thread 'main' panicked: unexpected port: ParseIntError { kind: InvalidDigit }"},
		{append(base(), "--https-resolver-template=[::1]:6876"), "thread 'main' panicked: unexpected port: ParseIntError { kind: InvalidDigit }"},
		{append(base(), "--https-resolver-template=x:70000"), "thread 'main' panicked: unexpected port: ParseIntError { kind: PosOverflow }"},
	} {
		_, lns, err := Boot(context.Background(), newest, c.args, nil, resolves)
		for _, ln := range lns {
			ln.Close()
		}
		var e *standin.ExitError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.args[len(c.args)-1], err)
		case c.want != "" && (!errors.As(err, &e) || e.Code != 101 || !strings.HasPrefix(e.Message, c.want)):
			t.Errorf("%q: %v, want exit 101 %q", c.args[len(c.args)-1], err, c.want)
		}
	}
}

// The probes and /metrics (where the pod's scrape annotations point) are
// axum GET routes with balancerd's answers.
func TestProbesAreBalancerdsRoutes(t *testing.T) {
	h := Probes(imageref.MustParseVersion("26.35.0"), time.Now())
	for _, c := range []struct {
		method, path string
		code         int
		body         string
	}{
		{http.MethodGet, "/api/readyz", 200, "ready"},
		{http.MethodGet, "/api/livez", 200, "Liveness check successful!"},
		{http.MethodHead, "/api/readyz", 200, ""},
		{http.MethodPost, "/api/readyz", 405, ""},
		{http.MethodGet, "/api/ready", 404, ""},
		{http.MethodGet, "/metrics", 200, ""},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
		if w.Code != c.code || (c.body != "" && w.Body.String() != c.body) {
			t.Errorf("%s %s: %d %q", c.method, c.path, w.Code, w.Body.String())
		}
		if c.path == "/metrics" && !strings.Contains(w.Body.String(), `mz_balancer_metadata_seconds{build_type="release",version="26.35.0"} `) {
			t.Errorf("/metrics: %q", w.Body.String())
		}
	}
}

// Told to stop, balancerd serves on (ready, taking connections) for its
// listen wait, then closes its listeners and waits for the connections
// still open.
func TestStopsAsBalancerdDoes(t *testing.T) {
	args := []string{"service", "--pgwire-listen-addr=127.0.0.1:0", "--https-listen-addr=127.0.0.1:0",
		"--internal-http-listen-addr=127.0.0.1:0", "--static-resolver-addr=127.0.0.1:1", "--https-resolver-template=x:6876"}
	cfg, lns, err := Boot(context.Background(), newest, args, nil, func(context.Context, string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	pg, internal := lns[0].Addr().String(), lns[2].Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	const listenWait = time.Second
	done := make(chan error, 1)
	go func() {
		done <- cfg.Serve(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), lns, Shutdown{ListenWait: listenWait, ConnectionWait: time.Minute})
	}()
	held, err := net.Dial("tcp", pg) // a client mid-startup
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	cancel()
	time.Sleep(listenWait / 4)
	if resp, err := http.Get("http://" + internal + "/api/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz during the listen wait: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if c, err := net.Dial("tcp", pg); err != nil {
		t.Errorf("pgwire refused during the listen wait: %v", err)
	} else {
		c.Close()
	}
	for time.Since(stopped) < 2*listenWait {
		if c, err := net.Dial("tcp", pg); err != nil {
			break
		} else {
			c.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c, err := net.Dial("tcp", pg); err == nil {
		c.Close()
		t.Fatal("pgwire still listening after the listen wait")
	}
	select {
	case err := <-done:
		t.Fatalf("returned with a connection open: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	held.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("did not return once the last connection closed")
	}
	if took := time.Since(stopped); took < listenWait {
		t.Errorf("stopped after %v, before the listen wait of %v", took, listenWait)
	}
}

// The static address is retried as mz_ore's Retry does: the last backoff
// is shortened so that one attempt comes at the deadline; a name that
// resolves just before it is accepted.
func TestStaticAddressIsTriedOnceMoreAtTheDeadline(t *testing.T) {
	args := []string{"service", "--pgwire-listen-addr=0.0.0.0:6875", "--https-listen-addr=0.0.0.0:6876",
		"--internal-http-listen-addr=0.0.0.0:8080", "--https-resolver-template=x:6876",
		"--static-resolver-addr=late:6875", "--static-resolver-addr-timeout=1s"}
	start := time.Now()
	var attempts []time.Duration
	late := func(context.Context, string) error {
		attempts = append(attempts, time.Since(start))
		if time.Since(start) < 900*time.Millisecond {
			return errors.New("no such host")
		}
		return nil
	}
	if err := Resolvers(context.Background(), newest, args, nil, late); err != nil {
		t.Fatalf("a name resolving at 0.9 s of 1 s: %v (attempts at %v)", err, attempts)
	}
	// 0, 0.25, 0.75, then the deadline.
	if len(attempts) != 4 || attempts[3] < time.Second || attempts[3] > 1500*time.Millisecond {
		t.Errorf("attempts at %v, want 4, the last at 1 s", attempts)
	}
}

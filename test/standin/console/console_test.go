package console

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/console"
	"github.com/materializeinc/orchestratord/pkg/imageref"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func noPair(string, string) (tls.Certificate, error) {
	return tls.Certificate{}, errors.New("open: no such file")
}

func okPair(string, string) (tls.Certificate, error) { return tls.Certificate{}, nil }

// The environment the operator gives the console is accepted, with and
// without TLS.
func TestAcceptsTheOperatorsEnvironment(t *testing.T) {
	cfg := console.DefaultConfig()
	endpoint := cfg.Endpoint(v1alpha1.BalancerdRef{ServiceName: "mzabc-balancerd", Namespace: "envs"})
	for listener, tlsOn := range map[string]bool{
		"listen 8080;": false,
		"listen 8080 ssl;\nssl_certificate /nginx/tls/tls.crt;\nssl_certificate_key /nginx/tls/tls.key;": true,
	} {
		c, err := Check(env(map[string]string{"MZ_ENDPOINT": endpoint, "MZ_NGINX_LISTENER_CONFIG": listener}), okPair)
		if err != nil || len(c.Listens) != 1 || c.Listens[0] != (Listen{Network: "tcp4", Addr: "0.0.0.0:8080", SSL: tlsOn}) || (c.TLS != nil) != tlsOn || c.Endpoint != endpoint {
			t.Errorf("%q: %+v, %v", listener, c, err)
		}
	}
}

// What nginx reads from the image's defaults and its own: no listener
// config is the image's "listen 8080;"; an empty one leaves nginx on its
// unprivileged default, 8000; an address of [::] only IPv6.
func TestListensWhereNginxWould(t *testing.T) {
	const ok = "http://b.n.svc.cluster.local:6876"
	for _, c := range []struct {
		listener *string
		want     []Listen
	}{
		{nil, []Listen{{Network: "tcp4", Addr: "0.0.0.0:8080"}}},
		{ptr(" "), []Listen{{Network: "tcp4", Addr: "0.0.0.0:8000"}}},
		{ptr("listen 8080; listen [::]:8080; server_name x; # both stacks"), []Listen{{Network: "tcp4", Addr: "0.0.0.0:8080"}, {Network: "tcp6", Addr: "[::]:8080"}}},
		{ptr("listen 127.0.0.1:9000 default_server;"), []Listen{{Network: "tcp4", Addr: "127.0.0.1:9000"}}},
		// An address whose port a wildcard listen names is served by the
		// wildcard's socket.
		{ptr("listen 127.0.0.1:8080; listen 8080;"), []Listen{{Network: "tcp4", Addr: "0.0.0.0:8080"}}},
		{ptr("listen [::]:8080 ipv6only=off; error_page 404 /404.html;"), []Listen{{Network: "tcp", Addr: "[::]:8080"}}},
	} {
		vars := map[string]string{"MZ_ENDPOINT": ok}
		if c.listener != nil {
			vars["MZ_NGINX_LISTENER_CONFIG"] = *c.listener
		}
		got, err := Check(env(vars), noPair)
		if err != nil || len(got.Listens) != len(c.want) {
			t.Errorf("%v: %+v, %v; want %+v", vars, got.Listens, err, c.want)
			continue
		}
		for i := range c.want {
			if got.Listens[i] != c.want[i] {
				t.Errorf("%v: %+v, want %+v", vars, got.Listens, c.want)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestRefusesWhatStopsNginx(t *testing.T) {
	const ok = "http://b.n.svc.cluster.local:6876"
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"MZ_NGINX_LISTENER_CONFIG": "listen 8080;"}, `unknown "MZ_ENDPOINT" variable`},
		{map[string]string{"MZ_ENDPOINT": "", "MZ_NGINX_LISTENER_CONFIG": "listen 8080;"}, `invalid number of arguments in "set"`},
		{map[string]string{"MZ_ENDPOINT": "http://b:6876/a b"}, `invalid number of arguments in "set"`},
		{map[string]string{"MZ_ENDPOINT": "http://b:6876/;x"}, "unexpected character"},
		{map[string]string{"MZ_ENDPOINT": "http://b:6876/$x"}, "unexpected character"},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080"}, `unexpected "}"`},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080;;"}, `unexpected ";"`},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 0;"}, "invalid port"},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 70000;"}, "invalid port"},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen +8080;"}, "invalid port"},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080; listen 8080;"}, "a duplicate listen 0.0.0.0:8080"},
		// The listener config comes first in the server block.
		{map[string]string{"MZ_NGINX_LISTENER_CONFIG": "listen 0;"}, "invalid port"},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080 tls;"}, `invalid parameter "tls"`},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080; http2 on; http2 on;"}, `"http2" directive is duplicate`},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080; proxy_pass x;"}, `unknown directive "proxy_pass"`},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080 ssl;"}, `no "ssl_certificate"`},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080 ssl; ssl_certificate /c;"}, `no "ssl_certificate_key" is defined for certificate "/c"`},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080 ssl; ssl_certificate /c; ssl_certificate_key /k;"}, "cannot load certificate"},
		// nginx loads every certificate named, with or without an ssl
		// listener.
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080; ssl_certificate /c; ssl_certificate_key /k;"}, "cannot load certificate"},
	} {
		_, err := Check(env(c.vars), noPair)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "nginx: [emerg] ") {
			t.Errorf("%v: %v, want %q", c.vars, err, c.want)
		}
	}
	// A URL nginx cannot proxy to is found per request (500), not at boot.
	if _, err := Check(env(map[string]string{"MZ_ENDPOINT": "b:6876"}), noPair); err != nil {
		t.Errorf("an endpoint that is no URL stopped the boot: %v", err)
	}
	// nginx reads the value as a token: a YAML block's newline is none of it.
	if c, err := Check(env(map[string]string{"MZ_ENDPOINT": ok + "\n"}), noPair); err != nil || c.Endpoint != ok {
		t.Errorf("an endpoint with a newline: %q, %v", c.Endpoint, err)
	}
}

// backend is balancerd's HTTP port as the console reaches it; it records
// what reaches it.
func backend(t *testing.T) (*httptest.Server, chan *http.Request) {
	got := make(chan *http.Request, 1)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r
		_, _ = io.WriteString(w, "from balancerd")
	}))
	t.Cleanup(b.Close)
	return b, got
}

func resolveTo(ip string) func(context.Context, string) ([]string, error) {
	return func(context.Context, string) ([]string, error) { return []string{ip}, nil }
}

func get(t *testing.T, h http.Handler, method, target string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	r.Host = "Console.Example.:8080"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

var newest = imageref.MustParseVersion("26.40.0")

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// /api goes to MZ_ENDPOINT by the name it gives, resolved per request, with
// the client's request URI and host; nothing else does.
func TestAPIIsProxiedToTheEndpoint(t *testing.T) {
	b, got := backend(t)
	_, port, _ := net.SplitHostPort(b.Listener.Addr().String())
	var asked []string
	lookup := func(_ context.Context, host string) ([]string, error) {
		asked = append(asked, host)
		return []string{"127.0.0.1"}, nil
	}
	c := Config{Endpoint: "http://mzabc-balancerd.envs.svc.cluster.local:" + port}
	h := Handler(c, newest, os.ReadFile, lookup, quiet)
	code, body := get(t, h, http.MethodPost, "/api/sql?options=%7B%7D")
	if code != http.StatusOK || body != "from balancerd" {
		t.Fatalf("/api/sql: %d %q", code, body)
	}
	r := <-got
	if r.URL.RequestURI() != "/api/sql?options=%7B%7D" || r.Host != "console.example" || r.Method != http.MethodPost ||
		r.Header.Get("X-Forwarded-Proto") != "http" || r.Header.Get("X-Request-ID") == "" {
		t.Errorf("balancerd got %s %s host %q headers %v", r.Method, r.URL.RequestURI(), r.Host, r.Header)
	}
	if len(asked) != 1 || asked[0] != "mzabc-balancerd.envs.svc.cluster.local" {
		t.Errorf("resolved %q", asked)
	}
	// From v26.39 the OAuth metadata is environmentd's; before, the app's.
	if code, body := get(t, h, http.MethodGet, "/.well-known/oauth-protected-resource/api/mcp"); code != http.StatusOK || body != "from balancerd" {
		t.Errorf("v26.40 .well-known: %d %q", code, body)
	} else {
		<-got
	}
	old := Handler(c, imageref.MustParseVersion("26.38.1"), os.ReadFile, lookup, quiet)
	if code, body := get(t, old, http.MethodGet, "/.well-known/oauth-protected-resource"); code != http.StatusOK || !strings.Contains(body, "console") {
		t.Errorf("v26.38 .well-known: %d %q", code, body)
	}
	// An asset's location is a regular expression, which nginx prefers
	// to the /api prefix: no such file.
	if code, _ := get(t, h, http.MethodGet, "/api/app.js"); code != http.StatusNotFound {
		t.Errorf("/api/app.js: %d, want 404", code)
	}
	select {
	case r := <-got:
		t.Errorf("balancerd got %s", r.URL)
	default:
	}
}

// What a user sees when the console cannot reach balancerd: 502 when its
// name does not resolve or nothing answers, 500 when MZ_ENDPOINT is no
// http(s) URL.
func TestAPIFailsAsNginxDoes(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	_, port, _ := net.SplitHostPort(closedAddr)
	notFound := func(context.Context, string) ([]string, error) {
		return nil, &net.DNSError{Err: "no such host", IsNotFound: true}
	}
	for _, c := range []struct {
		endpoint string
		lookup   func(context.Context, string) ([]string, error)
		want     int
	}{
		{"http://mzabc-balancerd.envs.svc.cluster.local:" + port, resolveTo("127.0.0.1"), http.StatusBadGateway},
		{"http://mzabc-balancerd.envs.svc.cluster.local:6876", notFound, http.StatusBadGateway},
		{"b:6876", resolveTo("127.0.0.1"), http.StatusInternalServerError},
		{"ftp://b:6876", resolveTo("127.0.0.1"), http.StatusInternalServerError},
	} {
		h := Handler(Config{Endpoint: c.endpoint}, newest, os.ReadFile, c.lookup, quiet)
		if code, _ := get(t, h, http.MethodGet, "/api/sql"); code != c.want {
			t.Errorf("%s: %d, want %d", c.endpoint, code, c.want)
		}
		// The app itself is served all the same.
		if code, _ := get(t, h, http.MethodGet, "/"); code != http.StatusOK {
			t.Errorf("%s: / answered %d", c.endpoint, code)
		}
	}
}

// Static files as the template serves them: any path is the app's index
// (try_files ... /index.html), the mounted app configuration as it is
// (JSON or not: the app, not nginx, reads it), missing assets 404, and only
// GET and HEAD.
func TestStaticFilesAsTheTemplateServesThem(t *testing.T) {
	files := map[string]string{}
	readFile := func(p string) ([]byte, error) {
		if v, ok := files[p]; ok {
			return []byte(v), nil
		}
		return nil, os.ErrNotExist
	}
	h := Handler(Config{Endpoint: "http://b:6876"}, newest, readFile, resolveTo("127.0.0.1"), quiet)
	if code, body := get(t, h, http.MethodGet, "/app-config/app-config.json"); code != http.StatusOK || !strings.Contains(body, "console") {
		t.Errorf("missing app config: %d %q, want the index", code, body)
	}
	files[AppConfigPath] = "not json"
	if code, body := get(t, h, http.MethodGet, "/app-config/app-config.json"); code != http.StatusOK || body != "not json" {
		t.Errorf("app config: %d %q", code, body)
	}
	for target, want := range map[string]int{"/some/route": 200, "/static/main.JS": 404, "/logo.svg": 404} {
		if code, _ := get(t, h, http.MethodGet, target); code != want {
			t.Errorf("%s: %d, want %d", target, code, want)
		}
	}
	if code, _ := get(t, h, http.MethodPost, "/"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", code)
	}
}

// "listen 8080;" is IPv4 only, as nginx binds it: on an IPv6 address
// nothing answers.
func TestAPortAloneListensOnIPv4Only(t *testing.T) {
	probe, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(probe.Addr().String())
	probe.Close()
	if ln, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Skip("no IPv6 loopback here")
	} else {
		ln.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, Config{Endpoint: "http://b:6876", Listens: []Listen{{Network: "tcp4", Addr: "0.0.0.0:" + port}}},
			http.NotFoundHandler())
	}()
	defer func() { cancel(); <-done }()
	var v4 error
	for range 50 {
		var c net.Conn
		if c, v4 = net.Dial("tcp4", "127.0.0.1:"+port); v4 == nil {
			c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v4 != nil {
		t.Fatalf("IPv4: %v", v4)
	}
	if c, err := net.Dial("tcp6", "[::1]:"+port); err == nil {
		c.Close()
		t.Error("the IPv6 loopback was answered")
	}
}

// What nginx passes on that Go's reverse proxy would not: the query as it
// came, the client's forwarding headers, every X-Forwarded-For; locations
// match the normalized path.
func TestAPIPassesTheRequestAsNginxDoes(t *testing.T) {
	b, got := backend(t)
	_, port, _ := net.SplitHostPort(b.Listener.Addr().String())
	h := Handler(Config{Endpoint: "http://b.envs.svc.cluster.local:" + port}, newest, os.ReadFile, resolveTo("127.0.0.1"), quiet)
	r := httptest.NewRequest(http.MethodGet, "//api/../api/sql?a=1;b=%zz", nil)
	r.Header.Add("X-Forwarded-For", "10.0.0.1")
	r.Header.Add("X-Forwarded-For", "10.0.0.2")
	r.Header.Set("Forwarded", "for=10.0.0.1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %q", w.Code, w.Body.String())
	}
	in := <-got
	if in.URL.RawQuery != "a=1;b=%zz" || in.Header.Get("Forwarded") != "for=10.0.0.1" ||
		in.Header.Get("X-Forwarded-For") != "10.0.0.1, 10.0.0.2, 192.0.2.1" || in.Host != "example.com" {
		t.Errorf("balancerd got query %q, host %q, headers %v", in.URL.RawQuery, in.Host, in.Header)
	}
	if code, _ := get(t, h, http.MethodGet, "/app-config/"); code != http.StatusForbidden {
		t.Errorf("/app-config/: %d, want 403 (a directory without an index)", code)
	}
}

// A balancerd that accepts but does not answer gets the location's
// timeout, then a 504.
func TestASilentBalancerdIsAGatewayTimeout(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	proxy := Config{Endpoint: "http://" + silent.Addr().String()}.proxy(resolveTo("127.0.0.1"), quiet, 200*time.Millisecond, true)
	w := httptest.NewRecorder()
	proxy(w, httptest.NewRequest(http.MethodGet, "/api/sql", nil))
	if w.Code != http.StatusGatewayTimeout {
		t.Errorf("%d, want 504", w.Code)
	}
}

// nginx's resolver keeps an answer (addresses, or that the name has none)
// for valid=10s, and asks again after a timeout.
func TestResolverAnswersAreKeptTenSeconds(t *testing.T) {
	now := time.Unix(0, 0)
	asked := 0
	var answer func() ([]string, error)
	lookup := cached(func(context.Context, string) ([]string, error) { asked++; return answer() }, func() time.Time { return now })
	ask := func() error { _, err := lookup(context.Background(), "b"); return err }
	answer = func() ([]string, error) { return []string{"10.0.0.1"}, nil }
	_ = ask()
	now = now.Add(9 * time.Second)
	_ = ask()
	if asked != 1 {
		t.Errorf("an address asked %d times within 10 s", asked)
	}
	now = now.Add(2 * time.Second)
	answer = func() ([]string, error) { return nil, &net.DNSError{Err: "no such host", IsNotFound: true} }
	if ask() == nil || ask() == nil || asked != 2 {
		t.Errorf("no such host: asked %d times, want 2 and an error both times", asked)
	}
	now = now.Add(11 * time.Second)
	answer = func() ([]string, error) { return nil, &net.DNSError{Err: "i/o timeout", IsTimeout: true} }
	_, _ = ask(), ask()
	if asked != 4 {
		t.Errorf("a timeout was kept: asked %d times, want 4", asked)
	}
}

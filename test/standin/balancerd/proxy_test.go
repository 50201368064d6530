package balancerd

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/materializeinc/orchestratord/pkg/imageref"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
	"github.com/materializeinc/orchestratord/test/standin/pgwire"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// environmentd serves one SQL listener (authenticator kind auth) and one
// HTTP listener, returning their addresses.
func environmentd(t *testing.T, auth string) (sql, web string) {
	t.Helper()
	plan := &standin.Plan{Password: "secret"}
	sqlLn, webLn := listen(t), listen(t)
	l := standin.Listener{AuthenticatorKind: auth, AllowedRoles: "NormalAndInternal"}
	go standin.ServeSQL(sqlLn, l, plan, func(context.Context) bool { return true })
	go func() {
		_ = standin.ServeHTTP(webLn, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "environmentd") }))
	}()
	return sqlLn.Addr().String(), webLn.Addr().String()
}

// proxying runs the balancer towards cfg's addresses and returns its pgwire and HTTPS
// addresses.
func proxying(t *testing.T, cfg *Config) (pg, web string) {
	t.Helper()
	pgLn, webLn := listen(t), listen(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var open sync.WaitGroup
	go func() { _ = accept(pgLn, &open, func(c net.Conn) { cfg.proxyPGWire(log, c) }) }()
	go func() { _ = accept(webLn, &open, func(c net.Conn) { cfg.proxyHTTPS(log, c) }) }()
	return pgLn.Addr().String(), webLn.Addr().String()
}

func login(t *testing.T, addr, user, password string) error {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return pgwire.Handshake(conn, user, password)
}

func TestProxiesPGWireAndHTTPToEnvironmentd(t *testing.T) {
	sql, web := environmentd(t, "Password")
	pg, https := proxying(t, &Config{StaticAddr: sql, HTTPSAddr: web})
	if err := login(t, pg, "mz_system", "secret"); err != nil {
		t.Errorf("a login through the balancer: %v", err)
	}
	// environmentd's refusal reaches the client through the proxy.
	var pgErr *pgwire.Error
	if err := login(t, pg, "mz_system", "wrong"); !errors.As(err, &pgErr) || pgErr.Code != pgwire.InvalidPassword {
		t.Errorf("a wrong password through the balancer: %v, want SQLSTATE %s", err, pgwire.InvalidPassword)
	}
	resp, err := http.Get("http://" + https + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "environmentd" {
		t.Errorf("HTTP through the balancer: %d %q", resp.StatusCode, body)
	}
}

// With environmentd gone, balancerd answers as upstream's does, which
// changed twice: from 26.9 a FATAL "upstream server not available" on
// pgwire and a 502 on HTTPS when it cannot connect (before, the connection
// closed); from 26.33 "internal error" (08004) when the name does not
// resolve (before, 28P01 with the resolver's error); HTTPS closes then.
func TestEnvironmentdDownIsUpstreamsAnswer(t *testing.T) {
	gone := listen(t)
	closedAddr := gone.Addr().String()
	_ = gone.Close()
	const unresolvable = "mzabc-environmentd.envs.svc.cluster.local:6875"
	for _, c := range []struct {
		version, addr string
		code, message string // pgwire's FATAL; "" the connection closed
		status        int    // HTTPS; 0 closed
	}{
		{"26.40.0", closedAddr, pgwire.RejectedEstablishment, "upstream server not available", http.StatusBadGateway},
		{"26.9.0", closedAddr, pgwire.RejectedEstablishment, "upstream server not available", http.StatusBadGateway},
		{"26.8.0", closedAddr, "", "", 0},
		{"26.40.0", unresolvable, pgwire.RejectedEstablishment, "internal error", 0},
		{"26.32.0", unresolvable, pgwire.InvalidPassword, "failed to lookup address information: Name or service not known", 0},
	} {
		cfg := &Config{StaticAddr: c.addr, HTTPSAddr: c.addr, Version: imageref.MustParseVersion(c.version),
			lookupHost: func(ctx context.Context, host string) ([]string, error) {
				if host == "127.0.0.1" {
					return []string{host}, nil
				}
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}}
		pg, https := proxying(t, cfg)
		var pgErr *pgwire.Error
		err := login(t, pg, "materialize", "")
		switch {
		case c.code == "" && (err == nil || errors.As(err, &pgErr)):
			t.Errorf("%s %s: pgwire %v, want the connection closed", c.version, c.addr, err)
		case c.code != "" && (!errors.As(err, &pgErr) || pgErr.Message != c.message || pgErr.Code != c.code):
			t.Errorf("%s %s: pgwire %v, want %s %q", c.version, c.addr, err, c.code, c.message)
		}
		// balancerd answers as soon as it fails to reach environmentd,
		// maybe before the request is read (it proxies a connection, not
		// requests): an http.Client may take that for an answer on an idle
		// connection.
		conn, err := net.Dial("tcp", https)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		switch {
		case c.status == 0 && err == nil:
			resp.Body.Close()
			t.Errorf("%s %s: HTTPS answered %d, want the connection closed", c.version, c.addr, resp.StatusCode)
		case c.status != 0 && err != nil:
			t.Errorf("%s %s: HTTPS %v, want %d", c.version, c.addr, err, c.status)
		case c.status != 0:
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Errorf("%s %s: HTTPS %d, want %d", c.version, c.addr, resp.StatusCode, c.status)
			}
		}
	}
}

// The startup checks balancerd makes before it resolves anything.
func TestRefusesABadStartup(t *testing.T) {
	sql, web := environmentd(t, "None")
	pg, _ := proxying(t, &Config{StaticAddr: sql, HTTPSAddr: web})
	for name, c := range map[string]struct {
		write func(io.Writer) error
		want  string
	}{
		"no user": {func(w io.Writer) error { return pgwire.WriteStartup(w, map[string]string{"database": "x"}) }, "user parameter required"},
		"protocol 2": {func(w io.Writer) error {
			_, err := w.Write([]byte{0, 0, 0, 8, 0, 2, 0, 0})
			return err
		}, "server does not support the client's requested protocol version"},
	} {
		conn, err := net.Dial("tcp", pg)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.write(conn); err != nil {
			t.Fatal(err)
		}
		typ, body, err := pgwire.ReadMessage(bufio.NewReader(conn))
		conn.Close()
		if err != nil || typ != 'E' || !strings.Contains(pgwire.ParseError(body).Message, c.want) {
			t.Errorf("%s: %q %v %v, want an error %q", name, typ, pgwire.ParseError(body), err, c.want)
		}
	}
}

// balancerd names each connection and its client to environmentd, and
// refuses a client that names them itself (upstream src/balancerd/src/lib.rs).
func TestClientsCannotNameTheirConnections(t *testing.T) {
	env := listen(t)
	got := make(chan map[string]string, 1)
	go func() {
		for {
			c, err := env.Accept()
			if err != nil {
				return
			}
			if s, err := pgwire.ReadStartup(c); err == nil {
				got <- s.Params
			}
			c.Close()
		}
	}()
	pg, _ := proxying(t, &Config{StaticAddr: env.Addr().String()})
	for _, key := range []string{"mz_connection_uuid", "mz_forwarded_for"} {
		conn, err := net.Dial("tcp", pg)
		if err != nil {
			t.Fatal(err)
		}
		if err := pgwire.WriteStartup(conn, map[string]string{"user": "materialize", key: "1.2.3.4"}); err != nil {
			t.Fatal(err)
		}
		msg, err := io.ReadAll(conn)
		conn.Close()
		if err != nil || !strings.Contains(string(msg), "08004") || !strings.Contains(string(msg), "invalid parameter '"+key+"'") {
			t.Errorf("a client naming %s: %q, %v", key, msg, err)
		}
	}
	select {
	case p := <-got:
		t.Fatalf("environmentd got a refused startup: %v", p)
	default:
	}
	conn, err := net.Dial("tcp", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := pgwire.WriteStartup(conn, map[string]string{"user": "materialize"}); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p["mz_forwarded_for"] != "127.0.0.1" || len(p["mz_connection_uuid"]) != 36 || p["mz_connection_uuid"][14] != '7' || p["user"] != "materialize" {
			t.Errorf("environmentd got %v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no startup reached environmentd")
	}
}

// With --tls-mode=require a plaintext startup is refused as pgwire-common
// refuses it: 08004.
func TestTLSRequiredIsRejectedEstablishment(t *testing.T) {
	pg, _ := proxying(t, &Config{TLS: &tls.Config{MinVersion: tls.VersionTLS12}, StaticAddr: "127.0.0.1:1"})
	var pgErr *pgwire.Error
	if err := login(t, pg, "materialize", ""); !errors.As(err, &pgErr) || pgErr.Code != pgwire.RejectedEstablishment || pgErr.Message != "TLS encryption is required" {
		t.Errorf("a plaintext startup: %v", err)
	}
}

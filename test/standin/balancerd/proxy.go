package balancerd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/standin/pgwire"
)

// startupTimeout bounds a client's startup (and TLS handshake): a peer that
// connects and says nothing holds a connection no longer.
const startupTimeout = 30 * time.Second

// accept hands each connection on ln to handle, closing it afterwards,
// until ln is closed; open counts the connections being handled.
func accept(ln net.Listener, open *sync.WaitGroup, handle func(net.Conn)) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return nil
		}
		open.Go(func() {
			defer c.Close()
			handle(c)
		})
	}
}

// proxyPGWire is balancerd's PgwireBalancer with the static resolver: the
// client's startup read (TLS where --tls-mode asks), the protocol version
// and user checked, environmentd's address resolved anew for every
// connection, the startup sent on (over TLS with --internal-tls), then the
// bytes copied both ways until either side closes.
func (c *Config) proxyPGWire(log *slog.Logger, conn net.Conn) {
	_ = conn.SetDeadline(time.Now().Add(startupTimeout))
	var client net.Conn = conn
	var startup pgwire.Startup
	for {
		var err error
		if startup, err = pgwire.ReadStartup(client); err != nil {
			return
		}
		if startup.Code != pgwire.SSLRequestCode && startup.Code != pgwire.GSSENCRequestCode {
			break
		}
		if startup.Code == pgwire.SSLRequestCode && c.TLS != nil && client == conn {
			if _, err := client.Write([]byte{'S'}); err != nil {
				return
			}
			client = tls.Server(conn, c.TLS)
			continue
		}
		if _, err := client.Write([]byte{'N'}); err != nil {
			return
		}
	}
	fatal := func(message string) {
		_ = pgwire.WriteError(client, "FATAL", pgwire.RejectedEstablishment, message)
	}
	if startup.Code == pgwire.Version3 {
		// balancerd names every connection and its client to environmentd;
		// a client that names them itself is refused.
		if _, ok := startup.Params[connUUIDKey]; ok {
			fatal("invalid parameter '" + connUUIDKey + "'")
			return
		}
		if _, ok := startup.Params[forwardedForKey]; ok {
			fatal("invalid parameter '" + forwardedForKey + "'")
			return
		}
		startup.Params[connUUIDKey] = newConnUUID()
		startup.Params[forwardedForKey] = peerIP(conn)
	}
	switch {
	case startup.Code == pgwire.CancelRequestCode:
		return // the stand-in routes no cancellation
	case startup.Code != pgwire.Version3:
		fatal("server does not support the client's requested protocol version")
		return
	}
	if _, ok := startup.Params["user"]; !ok {
		fatal("user parameter required")
		return
	}
	if c.TLS != nil && client == conn {
		fatal("TLS encryption is required")
		return
	}
	upstream, err := c.dialEnvironmentd(log, c.StaticAddr, true)
	var unresolved *resolveError
	switch {
	case errors.As(err, &unresolved) && c.Version.AtLeast(errorsAreUpstreams):
		log.Error("resolving connection destination", "error", err)
		fatal("internal error")
		return
	case errors.As(err, &unresolved):
		// Before 26.33 the resolver's error, as the client's password's.
		_ = pgwire.WriteError(client, "FATAL", pgwire.InvalidPassword, unresolved.Error())
		return
	case err != nil && c.Version.AtLeast(connectFailuresAnswered):
		log.Error("failed to connect to upstream server", "error", err)
		fatal("upstream server not available")
		return
	case err != nil:
		return // before 26.9: the connection closes, nothing said
	}
	defer upstream.Close()
	if err := pgwire.WriteStartup(upstream, startup.Params); err != nil {
		fatal("upstream server not available")
		return
	}
	_ = conn.SetDeadline(time.Time{})
	splice(client, upstream)
}

// proxyHTTPS is balancerd's HttpsBalancer without SNI: TLS terminated where
// --tls-mode asks, environmentd's HTTP address resolved for every
// connection (502 when it cannot be reached, written as raw HTTP as
// upstream does), then the bytes copied both ways.
func (c *Config) proxyHTTPS(log *slog.Logger, conn net.Conn) {
	var client net.Conn = conn
	if c.TLS != nil {
		_ = conn.SetDeadline(time.Now().Add(startupTimeout))
		t := tls.Server(conn, c.TLS)
		if err := t.Handshake(); err != nil {
			return
		}
		_ = conn.SetDeadline(time.Time{})
		client = t
	}
	upstream, err := c.dialEnvironmentd(log, c.HTTPSAddr, false)
	var unresolved *resolveError
	if errors.As(err, &unresolved) || (err != nil && !c.Version.AtLeast(connectFailuresAnswered)) {
		// The connection closes, nothing said.
		log.Error("https connection failed", "error", err)
		return
	}
	if err != nil {
		log.Error("failed to connect to upstream server", "error", err)
		const body = "upstream server not available"
		_, _ = fmt.Fprintf(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		return
	}
	defer upstream.Close()
	splice(client, upstream)
}

// dialEnvironmentd connects to addr, with TLS when --internal-tls says so
// (unverified, as upstream: environmentd has no certificate balancerd
// trusts); pgwire asks for TLS with an SSLRequest first and goes on in the
// clear when environmentd declines.
func (c *Config) dialEnvironmentd(log *slog.Logger, addr string, pgwireSSLRequest bool) (net.Conn, error) {
	// Resolved, then connected, each timed: a slow one is logged, so a
	// client's timeout can be told apart (DNS, the network, environmentd).
	began := time.Now()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	lookup := c.lookupHost
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	ips, err := lookup(context.Background(), host)
	resolved := time.Since(began)
	if err == nil && len(ips) == 0 {
		return nil, &resolveError{fmt.Sprintf("%s did not resolve to any addresses", addr)}
	}
	if err != nil {
		return nil, &resolveError{getaddrinfoError(err)}
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(ips[0], port), startupTimeout)
	if took := time.Since(began); took > time.Second {
		log.Warn("slow connection to environmentd", "addr", addr, "ip", ips[0], "resolve", resolved, "total", took, "error", err)
	}
	if err != nil {
		return nil, err
	}
	if !c.InternalTLS {
		return conn, nil
	}
	if pgwireSSLRequest {
		_ = conn.SetDeadline(time.Now().Add(startupTimeout))
		if err := pgwire.WriteSSLRequest(conn); err != nil {
			conn.Close()
			return nil, err
		}
		var answer [1]byte
		if _, err := io.ReadFull(conn, answer[:]); err != nil {
			conn.Close()
			return nil, err
		}
		_ = conn.SetDeadline(time.Time{})
		if answer[0] != 'S' {
			return conn, nil
		}
	}
	t := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // upstream does not verify environmentd either
	return t, nil
}

// Versions whose answers to a client differ when environmentd cannot be
// reached (upstream 03f9a1033e, e725791107).
var (
	connectFailuresAnswered = imageref.MustParseVersion("26.9.0-dev.0")
	errorsAreUpstreams      = imageref.MustParseVersion("26.33.0-dev.0")
)

// resolveError is a failure to resolve environmentd's address, which
// balancerd answers differently from a failure to connect.
type resolveError struct{ message string }

func (e *resolveError) Error() string { return e.message }

// getaddrinfoError is how Rust's std (tokio's lookup_host) words a failed
// lookup: glibc's getaddrinfo message.
func getaddrinfoError(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return "failed to lookup address information: Name or service not known"
	}
	return "failed to lookup address information: Temporary failure in name resolution"
}

// The startup parameters balancerd adds (upstream
// src/pgwire-common/src/conn.rs).
const (
	connUUIDKey     = "mz_connection_uuid"
	forwardedForKey = "mz_forwarded_for"
)

// newConnUUID is a version 7 UUID, as balancerd names connections.
func newConnUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	ms := uint64(time.Now().UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// peerIP is the client's address without its port.
func peerIP(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// splice copies bytes both ways until either side closes.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
}

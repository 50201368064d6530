package environmentd

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/materializeinc/orchestratord/pkg/environmentd"
	"github.com/materializeinc/orchestratord/test/standin/pgwire"
)

// startupTimeout bounds a client's startup phase: a peer that connects and
// says nothing holds a connection no longer.
const startupTimeout = 30 * time.Second

// noSQL is the stand-in's answer to every query: it logs clients in as
// environmentd's pgwire server does, and runs nothing.
const noSQL = "TEST STAND-IN, not Materialize: it runs no SQL"

// ServeSQL answers pgwire connections on ln for listener l until ln is
// closed: TLS when the client asks and the listener enables it (refused
// otherwise), the listener's authenticator (a cleartext password for mz_system
// where it authenticates) and allowed roles, a login only once the adapter is
// up (ready), then an error for each query.
func ServeSQL(ln net.Listener, l Listener, plan *Plan, ready func(context.Context) bool) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			serveSQLConn(conn, l, plan, ready)
		}()
	}
}

func serveSQLConn(conn net.Conn, l Listener, plan *Plan, ready func(context.Context) bool) {
	_ = conn.SetDeadline(time.Now().Add(startupTimeout))
	var c net.Conn = conn
	encrypted := false
	var startup pgwire.Startup
	for {
		var err error
		if startup, err = pgwire.ReadStartup(c); err != nil {
			return
		}
		switch startup.Code {
		case pgwire.SSLRequestCode:
			if !l.EnableTLS || encrypted || plan.TLS == nil {
				if _, err := c.Write([]byte{'N'}); err != nil {
					return
				}
				continue
			}
			if _, err := c.Write([]byte{'S'}); err != nil {
				return
			}
			c, encrypted = tls.Server(conn, plan.TLS), true
			continue
		case pgwire.GSSENCRequestCode:
			if _, err := c.Write([]byte{'N'}); err != nil {
				return
			}
			continue
		}
		break
	}
	fatal := func(code, message string) { _ = pgwire.WriteError(c, "FATAL", code, message) }
	switch {
	case startup.Code == pgwire.CancelRequestCode:
		return
	case startup.Code != pgwire.Version3:
		fatal(pgwire.RejectedEstablishment, "server does not support the client's requested protocol version")
		return
	}
	user, ok := startup.Params["user"]
	if !ok {
		fatal(pgwire.RejectedEstablishment, "user parameter required")
		return
	}
	if l.EnableTLS && !encrypted {
		fatal(pgwire.RejectedEstablishment, "TLS encryption is required")
		return
	}
	r := bufio.NewReader(c)
	if l.AuthenticatorKind == "Password" {
		if err := pgwire.WriteAuth(c, pgwire.AuthCleartextPassword); err != nil {
			return
		}
		typ, body, err := pgwire.ReadMessage(r)
		if err != nil || typ != 'p' {
			return
		}
		if len(body) == 0 || user != environmentd.SystemUser || string(body[:len(body)-1]) != plan.Password {
			fatal(pgwire.InvalidPassword, "invalid password")
			return
		}
	}
	if !Allows(l.AllowedRoles, user) {
		fatal(pgwire.InvalidAuthorization, "role \""+user+"\" is not allowed to connect on this listener")
		return
	}
	// A session needs the adapter: the login waits for it, as a client of
	// environmentd's pgwire server does while the catalog opens.
	_ = conn.SetDeadline(time.Time{})
	if !ready(context.Background()) {
		return
	}
	for _, step := range []func() error{
		func() error { return pgwire.WriteAuth(c, pgwire.AuthOK) },
		func() error { return pgwire.WriteParameterStatus(c, "server_version", "9.5.0") },
		func() error { return pgwire.WriteParameterStatus(c, "client_encoding", "UTF8") },
		func() error { return pgwire.WriteReadyForQuery(c) },
	} {
		if err := step(); err != nil {
			return
		}
	}
	for {
		typ, _, err := pgwire.ReadMessage(r)
		if err != nil {
			return
		}
		switch typ {
		case 'X':
			return
		case 'Q':
			if pgwire.WriteError(c, "ERROR", pgwire.FeatureNotSupported, noSQL) != nil || pgwire.WriteReadyForQuery(c) != nil {
				return
			}
		default:
			fatal(pgwire.ProtocolViolation, noSQL+" (only the simple query protocol is answered)")
			return
		}
	}
}

package environmentd

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/materializeinc/orchestratord/test/standin/pgwire"
)

func serveSQL(t *testing.T, l Listener, ready func(context.Context) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go ServeSQL(ln, l, &Plan{Password: "secret"}, ready)
	return ln.Addr().String()
}

func handshake(addr, user, password string) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	return pgwire.Handshake(conn, user, password)
}

// A session opens only once the adapter is up: until then the login waits.
func TestSQLLoginWaitsForTheAdapter(t *testing.T) {
	up := make(chan struct{})
	addr := serveSQL(t, Listener{AuthenticatorKind: "None", AllowedRoles: "Normal"}, func(ctx context.Context) bool {
		select {
		case <-up:
			return true
		case <-ctx.Done():
			return false
		}
	})
	done := make(chan error, 1)
	go func() { done <- handshake(addr, "materialize", "") }()
	select {
	case err := <-done:
		t.Fatalf("logged in before the adapter was up: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(up)
	if err := <-done; err != nil {
		t.Fatalf("login once the adapter is up: %v", err)
	}
}

func TestSQLRefusesWhatEnvironmentdRefuses(t *testing.T) {
	ready := func(context.Context) bool { return true }
	password := serveSQL(t, Listener{AuthenticatorKind: "Password", AllowedRoles: "NormalAndInternal"}, ready)
	internal := serveSQL(t, Listener{AuthenticatorKind: "None", AllowedRoles: "Internal"}, ready)
	tlsOnly := serveSQL(t, Listener{AuthenticatorKind: "None", AllowedRoles: "Normal", EnableTLS: true}, ready)
	for _, c := range []struct {
		name, addr, user, password, code string
	}{
		{"a wrong password", password, "mz_system", "nope", pgwire.InvalidPassword},
		{"a normal user on an internal listener", internal, "materialize", "", pgwire.InvalidAuthorization},
		{"no TLS where the listener requires it", tlsOnly, "materialize", "", pgwire.RejectedEstablishment},
	} {
		var pgErr *pgwire.Error
		if err := handshake(c.addr, c.user, c.password); !errors.As(err, &pgErr) || pgErr.Code != c.code || pgErr.Severity != "FATAL" {
			t.Errorf("%s: %v, want FATAL %s", c.name, err, c.code)
		}
	}
	if err := handshake(password, "mz_system", "secret"); err != nil {
		t.Errorf("mz_system with its password: %v", err)
	}
	if err := handshake(internal, "mz_system", ""); err != nil {
		t.Errorf("mz_system on an internal listener: %v", err)
	}
}

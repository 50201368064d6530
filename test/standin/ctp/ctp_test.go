package ctp

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func serve(t *testing.T, r *Replica, version, fqdn string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Serve(ln, version, fqdn, func(string, ...any) {}) }()
	t.Cleanup(func() {
		_ = ln.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr, version, host string) (*Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return Dial(ctx, addr, version, host)
}

// Hydration starts with the first dataflows, lasts as long as the
// controller asked, and survives the controller's reconnection.
func TestReplicaHydratesAfterItsDataflowsAreCreated(t *testing.T) {
	r := &Replica{Process: 1, DefaultHydration: time.Hour}
	addr := serve(t, r, "26.35.0", "")
	c, err := dial(t, addr, "26.35.0", "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Do(Command{Kind: "status"}, time.Second)
	if err != nil || s.Hydrated || s.Process != 1 {
		t.Fatalf("before dataflows: %+v, %v", s, err)
	}
	if s, err = c.Do(Command{Kind: "create-dataflows", HydrateFor: "200ms"}, time.Second); err != nil || s.Hydrated {
		t.Fatalf("just created: %+v, %v", s, err)
	}
	time.Sleep(250 * time.Millisecond)
	_ = c.Close()
	c, err = dial(t, addr, "26.35.0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A second create does not restart hydration (the dataflows exist).
	if s, err = c.Do(Command{Kind: "create-dataflows", HydrateFor: "1h"}, time.Second); err != nil || !s.Hydrated {
		t.Fatalf("after hydration and a reconnection: %+v, %v", s, err)
	}
}

// A controller of another version, or one that expects another host, is
// refused at the handshake, as upstream's transport refuses it.
func TestHandshakeRefusesAnotherVersionOrHost(t *testing.T) {
	addr := serve(t, &Replica{}, "26.35.0", "mzx-cluster-u1-replica-u1-gen-1-0.svc")
	if _, err := dial(t, addr, "26.5.0", "mzx-cluster-u1-replica-u1-gen-1-0.svc"); err == nil || !strings.Contains(err.Error(), "version mismatch: 26.35.0 != 26.5.0") {
		t.Errorf("other version: %v", err)
	}
	c, err := dial(t, addr, "26.35.0", "elsewhere")
	if err == nil {
		// The server checks after sending its hello: the refusal shows
		// as the connection's end.
		if _, err = c.Do(Command{Kind: "status"}, time.Second); err == nil {
			t.Error("a controller expecting another host was served")
		}
		_ = c.Close()
	}
	c, err = dial(t, addr, "26.35.0", "mzx-cluster-u1-replica-u1-gen-1-0.svc")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Do(Command{Kind: "status"}, time.Second); err != nil {
		t.Errorf("the right controller: %v", err)
	}
}

// The newest controller wins: its connection ends the one before.
func TestNewestControllerWins(t *testing.T) {
	addr := serve(t, &Replica{}, "v", "")
	old, err := dial(t, addr, "v", "")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := old.Do(Command{Kind: "status"}, time.Second); err != nil {
		t.Fatal(err)
	}
	cur, err := dial(t, addr, "v", "")
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if _, err := cur.Do(Command{Kind: "status"}, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Do(Command{Kind: "status"}, time.Second); err == nil {
		t.Error("the older controller is still served")
	}
}

// A message over the bound ends the connection instead of being buffered.
func TestOversizeMessageEndsTheConnection(t *testing.T) {
	addr := serve(t, &Replica{}, "v", "")
	c, err := dial(t, addr, "v", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Do(Command{Kind: strings.Repeat("x", 2*maxLine)}, 2*time.Second); err == nil {
		t.Error("an oversize command was answered")
	}
}

package fence

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
)

// Abort resets the connections (the peer reads ECONNRESET, not an orderly
// EOF: unsent data is discarded, not delivered), and forgets them; a
// connection closed by its client is forgotten at once.
func TestConnectionsAbortResets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	conns := NewConnections()
	closed, err := conns.Dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	<-accepted
	closed.Close()
	if _, err := conns.Dial(context.Background(), "tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	if n := conns.Abort(); n != 1 {
		t.Fatalf("Abort reset %d connections, want the 1 still open", n)
	}
	_, err = server.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the server read %v, want ECONNRESET (an orderly close would be %v)", err, io.EOF)
	}
	if n := conns.Abort(); n != 0 {
		t.Errorf("a second Abort found %d connections", n)
	}
}

// Package ctp is the TEST STAND-INs' model of Materialize's cluster
// transport protocol (upstream src/service/src/transport.rs), spoken between
// the environmentd stand-in (the controller, a client) and the clusterd
// stand-in (a server) over TCP, through the cluster's Services and
// NetworkPolicies. What carries over from upstream: both ends send a Hello
// first and a version mismatch or a wrong server FQDN ends the connection
// ("version mismatch: A != B"); a server serves one controller at a time,
// the newest connection cancelling the one before; a replica's dataflows
// outlive a controller's connection, so a reconnecting controller finds the
// replica as hydrated as it left it. The messages themselves are the
// stand-ins' own: one JSON object a line, each bounded.
package ctp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// magic tells a stand-in peer from anything else on the port.
const magic = "materialize-standin-ctp/1"

// maxLine bounds one message: a peer cannot make the other buffer more.
const maxLine = 64 << 10

// Hello is what each end sends first.
type Hello struct {
	Magic      string `json:"magic"`
	Version    string `json:"version"`
	ServerFQDN string `json:"server_fqdn,omitempty"`
}

// Command is what the controller sends.
type Command struct {
	// Kind is "create-dataflows" (hydration starts, lasting HydrateFor, or
	// the replica's own default when empty) or "status".
	Kind       string `json:"kind"`
	HydrateFor string `json:"hydrate_for,omitempty"`
}

// Status is the replica's answer to every command.
type Status struct {
	Process  int  `json:"process"`
	Hydrated bool `json:"hydrated"`
}

// conn reads and writes lines of JSON.
type conn struct {
	c net.Conn
	r *bufio.Reader
}

func newConn(c net.Conn) *conn { return &conn{c: c, r: bufio.NewReaderSize(c, 4096)} }

func (c *conn) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.c.Write(append(b, '\n'))
	return err
}

func (c *conn) receive(v any) error {
	var line []byte
	for {
		chunk, isPrefix, err := c.r.ReadLine()
		if err != nil {
			return err
		}
		line = append(line, chunk...)
		if len(line) > maxLine {
			return fmt.Errorf("message over %d bytes", maxLine)
		}
		if !isPrefix {
			break
		}
	}
	return json.Unmarshal(line, v)
}

// handshake sends ours and checks theirs, as upstream's handshake does.
func (c *conn) handshake(version, serverFQDN string, isServer bool) error {
	mine := Hello{Magic: magic, Version: version}
	if !isServer {
		mine.ServerFQDN = serverFQDN
	}
	if err := c.send(mine); err != nil {
		return err
	}
	var peer Hello
	if err := c.receive(&peer); err != nil {
		return fmt.Errorf("reading hello: %w", err)
	}
	if peer.Magic != magic {
		return fmt.Errorf("invalid protocol magic: %q", peer.Magic)
	}
	if peer.Version != version {
		return fmt.Errorf("version mismatch: %s != %s", peer.Version, version)
	}
	// Upstream compares only when both ends name the server.
	if isServer && serverFQDN != "" && peer.ServerFQDN != "" && peer.ServerFQDN != serverFQDN {
		return fmt.Errorf("server FQDN mismatch: %s != %s", peer.ServerFQDN, serverFQDN)
	}
	return nil
}

// Client is a controller's connection to one replica process.
type Client struct{ c *conn }

// Dial connects to addr and shakes hands as a controller of version,
// expecting the server to be host.
func Dial(ctx context.Context, addr, version, host string) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := newConn(nc)
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	if err := c.handshake(version, host, false); err != nil {
		_ = nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return &Client{c: c}, nil
}

// Do sends cmd and reads the replica's status, within timeout.
func (c *Client) Do(cmd Command, timeout time.Duration) (Status, error) {
	_ = c.c.c.SetDeadline(time.Now().Add(timeout))
	var s Status
	if err := c.c.send(cmd); err != nil {
		return s, err
	}
	err := c.c.receive(&s)
	return s, err
}

// Close ends the connection.
func (c *Client) Close() error { return c.c.c.Close() }

// Replica is a replica process's dataflow state: hydration starts with the
// first dataflows a controller creates and survives reconnections.
type Replica struct {
	Process int
	// DefaultHydration is how long hydration takes when the controller
	// does not say.
	DefaultHydration time.Duration

	mu       sync.Mutex
	hydrated time.Time // zero until dataflows were created
}

func (r *Replica) handle(cmd Command, now time.Time) (Status, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch cmd.Kind {
	case "create-dataflows":
		if r.hydrated.IsZero() {
			d := r.DefaultHydration
			if cmd.HydrateFor != "" {
				parsed, err := time.ParseDuration(cmd.HydrateFor)
				if err != nil || parsed < 0 {
					return Status{}, fmt.Errorf("invalid hydrate_for %q", cmd.HydrateFor)
				}
				d = parsed
			}
			r.hydrated = now.Add(d)
		}
	case "status":
	default:
		return Status{}, fmt.Errorf("unknown command %q", cmd.Kind)
	}
	return Status{Process: r.Process, Hydrated: !r.hydrated.IsZero() && !now.Before(r.hydrated)}, nil
}

// Serve accepts controllers on ln until it is closed, serving the newest
// only; log reports each connection's end.
func (r *Replica) Serve(ln net.Listener, version, fqdn string, log func(msg string, args ...any)) error {
	var (
		mu      sync.Mutex
		current net.Conn
		wg      sync.WaitGroup
	)
	defer wg.Wait()
	for {
		nc, err := ln.Accept()
		if err != nil {
			mu.Lock()
			if current != nil {
				_ = current.Close()
			}
			mu.Unlock()
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		mu.Lock()
		if current != nil { // the newest controller wins
			_ = current.Close()
		}
		current = nc
		mu.Unlock()
		wg.Go(func() {
			err := r.serveConn(nc, version, fqdn)
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log("controller connection ended", "remote", nc.RemoteAddr().String(), "error", err.Error())
			}
			_ = nc.Close()
		})
	}
}

func (r *Replica) serveConn(nc net.Conn, version, fqdn string) error {
	c := newConn(nc)
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.handshake(version, fqdn, true); err != nil {
		return err
	}
	_ = nc.SetDeadline(time.Time{})
	for {
		var cmd Command
		if err := c.receive(&cmd); err != nil {
			return err
		}
		s, err := r.handle(cmd, time.Now())
		if err != nil {
			return err
		}
		if err := c.send(s); err != nil {
			return err
		}
	}
}

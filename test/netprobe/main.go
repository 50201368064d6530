// Command netprobe is the end-to-end tests' TCP peer (test/e2e, the
// NetworkPolicy test): a pod runs `netprobe serve ADDR`, and the test runs
// `netprobe dial ADDR` in another pod with kubectl exec to see whether the
// network lets one reach the other. `netprobe watch` is a client of
// Materialize through balancerd across a rollout: it logs in over pgwire and
// sends an HTTP request (and one through the console's API proxy), again and
// again, and prints one JSON line per attempt, which the test reads from the
// pod's log.
//
//	netprobe serve ADDR              accept TCP connections on ADDR, answer "ok", until SIGTERM
//	netprobe dial [-timeout D] [-connect] ADDR
//	                                 connect to ADDR and read the answer: exit 0 if
//	                                 it came, 3 if the connection failed, 2 on misuse;
//	                                 -connect: the TCP handshake is enough (a peer
//	                                 that is not netprobe, which says nothing first)
//	netprobe watch [-every D] [-timeout D] -pgwire ADDR -http URL [-console URL]
//	                                 until SIGTERM: a pgwire login as materialize
//	                                 and an HTTP GET every D (and a GET of the
//	                                 console's /api URL), a line each
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/materializeinc/orchestratord/test/standin/pgwire"
)

// Unreachable is dial's exit code when the connection fails: the test tells
// it apart from a failure of the exec itself.
const Unreachable = 3

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "serve":
		if len(os.Args) != 3 {
			usage()
		}
		if err := serve(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "netprobe serve:", err)
			os.Exit(1)
		}
	case "dial":
		fs := flag.NewFlagSet("dial", flag.ExitOnError)
		timeout := fs.Duration("timeout", 2*time.Second, "give up after this long")
		connectOnly := fs.Bool("connect", false, "succeed once connected, without an answer")
		_ = fs.Parse(os.Args[2:])
		if fs.NArg() != 1 {
			usage()
		}
		if err := dial(fs.Arg(0), *timeout, *connectOnly); err != nil {
			fmt.Fprintln(os.Stderr, "netprobe dial:", err)
			os.Exit(Unreachable)
		}
		fmt.Println("ok")
	case "watch":
		fs := flag.NewFlagSet("watch", flag.ExitOnError)
		every := fs.Duration("every", 200*time.Millisecond, "attempt this often")
		timeout := fs.Duration("timeout", 2*time.Second, "give an attempt up after this long")
		pgAddr := fs.String("pgwire", "", "log in over pgwire at this address")
		url := fs.String("http", "", "GET this URL")
		consoleURL := fs.String("console", "", "GET this URL of the console's API proxy")
		_ = fs.Parse(os.Args[2:])
		if fs.NArg() != 0 || (*pgAddr == "" && *url == "" && *consoleURL == "") {
			usage()
		}
		watch(*every, *timeout, *pgAddr, *url, *consoleURL)
	default:
		usage()
	}
}

// Attempt is one line of watch's output.
type Attempt struct {
	At    time.Time `json:"at"`   // when the attempt began
	Kind  string    `json:"kind"` // "pgwire", "http" or "console"
	Took  float64   `json:"took"` // seconds
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
}

func watch(every, timeout time.Duration, pgAddr, url, consoleURL string) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := json.NewEncoder(os.Stdout)
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	report := func(kind string, start time.Time, err error) {
		a := Attempt{At: start.UTC(), Kind: kind, OK: err == nil, Took: time.Since(start).Seconds()}
		if err != nil {
			a.Error = err.Error()
		}
		_ = out.Encode(a)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if pgAddr != "" {
			start := time.Now()
			report("pgwire", start, login(pgAddr, timeout))
		}
		if url != "" {
			start := time.Now()
			report("http", start, get(client, url))
		}
		if consoleURL != "" {
			start := time.Now()
			report("console", start, get(client, consoleURL))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// login is a pgwire login as materialize: a new connection each time, as a
// client that reconnects would open.
func login(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	return pgwire.Handshake(conn, "materialize", "")
}

// get is an HTTP GET on a new connection; any answer of environmentd's
// counts (balancerd's own answer when it cannot reach environmentd is a 502;
// the console's, when it cannot reach balancerd, a 502 or a 500).
func get(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	if resp.StatusCode >= http.StatusInternalServerError {
		// The body tells the proxies apart (balancerd's "upstream server
		// not available", nginx's "502 Bad Gateway").
		return fmt.Errorf("HTTP %d from %s: %.100q", resp.StatusCode, resp.Request.URL.Host, body)
	}
	return nil
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: netprobe serve ADDR | netprobe dial [-timeout D] ADDR | netprobe watch [-every D] [-timeout D] -pgwire ADDR -http URL [-console URL]")
	os.Exit(2)
}

func serve(addr string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	fmt.Println("serving on", l.Addr())
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer func() { _ = conn.Close() }()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.WriteString(conn, "ok\n")
		}()
	}
}

// dial connects to addr and, unless connectOnly, reads netprobe's answer.
// A policy agent decides on a connection's first packet, so a completed
// handshake is reachability.
func dial(addr string, timeout time.Duration, connectOnly bool) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if connectOnly {
		return nil
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	b := make([]byte, 3)
	if _, err := io.ReadFull(conn, b); err != nil {
		return fmt.Errorf("connected, but no answer: %w", err)
	}
	if string(b) != "ok\n" {
		return fmt.Errorf("answer %q, want \"ok\"", b)
	}
	return nil
}

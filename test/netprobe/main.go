// Command netprobe is the end-to-end tests' TCP peer (test/e2e, the
// NetworkPolicy test): a pod runs `netprobe serve ADDR`, and the test runs
// `netprobe dial ADDR` in another pod with kubectl exec to see whether the
// network lets one reach the other.
//
//	netprobe serve ADDR              accept TCP connections on ADDR, answer "ok", until SIGTERM
//	netprobe dial [-timeout D] ADDR  connect to ADDR and read the answer: exit 0 if
//	                                 it came, 3 if the connection failed, 2 on misuse
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
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
		_ = fs.Parse(os.Args[2:])
		if fs.NArg() != 1 {
			usage()
		}
		if err := dial(fs.Arg(0), *timeout); err != nil {
			fmt.Fprintln(os.Stderr, "netprobe dial:", err)
			os.Exit(Unreachable)
		}
		fmt.Println("ok")
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: netprobe serve ADDR | netprobe dial [-timeout D] ADDR")
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

func dial(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
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

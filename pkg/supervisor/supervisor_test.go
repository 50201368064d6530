package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/materializeinc/orchestratord/test/program"
)

// childEnv makes the test binary a child of the kind it names instead of
// running the tests.
const childEnv = "SUPERVISOR_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "serve":
		serveChild()
	case "fail":
		os.Exit(3)
	case "crash-soon":
		time.Sleep(50 * time.Millisecond)
		os.Exit(2)
	}
	os.Exit(1)
}

// serveChild answers every request with its pid on the listener of
// $SUPERVISOR_TEST_ADDR until SIGTERM, then exits 0.
func serveChild() {
	ln, err := Listen(os.Getenv("SUPERVISOR_TEST_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, os.Getpid())
	})}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() { <-term; _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		os.Exit(1)
	}
	os.Exit(0)
}

func freeAddress(t *testing.T) string {
	t.Helper()
	addr, err := program.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

type supervised struct {
	addr string
	logs *observer.ObservedLogs
	stop context.CancelFunc
	done chan struct{} // closed when Run has returned err
	err  error
}

// wait returns what Run returned.
func (s *supervised) wait() error {
	<-s.done
	return s.err
}

func start(t *testing.T, kind string, cfg Config) *supervised {
	t.Helper()
	s := &supervised{addr: freeAddress(t), done: make(chan struct{})}
	core, logs := observer.New(zapcore.InfoLevel)
	s.logs = logs
	cfg.Addresses = []string{s.addr, s.addr} // a duplicate is opened once
	cfg.Log = zap.New(core)
	cfg.Command = func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+kind, "SUPERVISOR_TEST_ADDR="+s.addr)
		cmd.Stderr = os.Stderr
		return cmd
	}
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() { s.err = Run(ctx, cfg); close(s.done) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return")
		}
	})
	return s
}

// pid asks the child on a new connection which process it is.
func (s *supervised) pid() (int, error) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + s.addr)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(body))
}

// A child SIGKILLed is replaced on the same listener: connections made
// while no child runs wait in the backlog and are served by the next one;
// none is refused. SIGTERM of the supervisor (its context) stops the child,
// which exits 0, and Run returns nil.
func TestCrashedChildIsReplacedOnTheSameListener(t *testing.T) {
	s := start(t, "serve", Config{MinUptime: time.Millisecond})
	var first int
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if first, err = s.pid(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first child never answered: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Every request from the kill on succeeds; the first ones were made
	// while no child was running.
	var second int
	for range 20 {
		pid, err := s.pid()
		if err != nil {
			t.Fatalf("a request after the child's SIGKILL failed: %v", err)
		}
		if pid == first {
			t.Fatalf("answered by the killed child %d", pid)
		}
		second = pid
	}
	if n := s.logs.FilterMessage("server process died; starting a new one on the same listeners").Len(); n != 1 {
		t.Errorf("%d restarts logged, want 1", n)
	}

	s.stop()
	if err := s.wait(); err != nil {
		t.Errorf("Run after SIGTERM of a healthy child: %v", err)
	}
	if err := syscall.Kill(second, 0); err == nil {
		t.Errorf("child %d still running after Run returned", second)
	}
	// Stopped, nothing holds the socket: a dial is refused, not queued.
	if conn, err := net.Dial("tcp", s.addr); err == nil {
		conn.Close()
		t.Error("a dial after the stop was accepted: the listening socket is still open")
	}
}

// A child that dies right after it started would die again: not
// restarted, Run fails (and the kubelet's backoff takes over).
func TestChildDyingAtOnceIsNotRestarted(t *testing.T) {
	s := start(t, "fail", Config{MinUptime: 10 * time.Second})
	err := s.wait()
	if err == nil || !strings.Contains(err.Error(), "not restarted") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Run: %v", err)
	}
	if n := s.logs.FilterMessage("server process started").Len(); n != 1 {
		t.Errorf("%d children started, want 1", n)
	}
}

// Restarts are capped within the window.
func TestRestartsAreCapped(t *testing.T) {
	s := start(t, "crash-soon", Config{MinUptime: time.Millisecond, MaxRestarts: 2, Window: time.Minute})
	err := s.wait()
	if err == nil || !strings.Contains(err.Error(), "restarted 2 times") {
		t.Fatalf("Run: %v", err)
	}
	if n := s.logs.FilterMessage("server process started").Len(); n != 3 {
		t.Errorf("%d children started, want 3 (the first and 2 restarts)", n)
	}
}

// A process not supervised opens its own listener.
func TestListenWithoutSupervisor(t *testing.T) {
	t.Setenv(EnvListeners, "")
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	t.Setenv(EnvListeners, "127.0.0.1:1=1")
	if _, err := Listen("127.0.0.1:1"); err == nil {
		t.Error("descriptor 1 (stdout) accepted as a listener")
	}
}

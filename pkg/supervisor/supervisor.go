// Package supervisor keeps a server's listening sockets open across a crash
// of the server. The supervisor opens the listeners and runs the server as a
// child process that inherits them; when the child dies (a panic, a fatal
// runtime error, a SIGKILL; an OOM kill only where the kernel kills the one
// process, not the container's whole cgroup: cgroup v1, or a kubelet with
// singleProcessOOMKill) it starts a new one at once. Meanwhile the kernel keeps
// accepting connections into the listeners' backlog, where they wait for the
// new child instead of being refused: a client that dials in that second
// (the API server opening a connection to a webhook pod) is served late
// rather than failed. Requests in flight on the dead child are lost either
// way.
//
// A child that dies soon after it started, or too often, is not restarted:
// the supervisor exits with an error, and the kubelet's crash-loop backoff
// takes over, as without a supervisor.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// EnvListeners, in a child's environment, lists the listeners it inherits
// as "address=fd" pairs separated by ";".
// (Not ORCHESTRATORD_*: that prefix sets flags.)
const EnvListeners = "SUPERVISED_LISTENERS"

// Supervised reports whether this process is a supervised child.
func Supervised() bool { return os.Getenv(EnvListeners) != "" }

// Listen returns the TCP listener inherited for address, if this process is
// a supervised child that inherited one, else a new one.
func Listen(address string) (net.Listener, error) {
	for _, pair := range strings.Split(os.Getenv(EnvListeners), ";") {
		addr, fd, ok := strings.Cut(pair, "=")
		if !ok || addr != address {
			continue
		}
		n, err := strconv.Atoi(fd)
		if err != nil || n < 3 {
			return nil, fmt.Errorf("%s: bad file descriptor %q for %s", EnvListeners, fd, address)
		}
		f := os.NewFile(uintptr(n), address)
		defer f.Close() // FileListener holds its own duplicate
		ln, err := net.FileListener(f)
		if err != nil {
			return nil, fmt.Errorf("inherited listener for %s: %w", address, err)
		}
		return ln, nil
	}
	return net.Listen("tcp", address)
}

// Defaults of Config.
const (
	DefaultMinUptime   = 10 * time.Second
	DefaultMaxRestarts = 5
	DefaultWindow      = 5 * time.Minute
)

// Config is what Run supervises.
type Config struct {
	// Addresses are the TCP addresses to listen on (duplicates are opened
	// once).
	Addresses []string
	// Command makes the child's command; its ExtraFiles and Env are set by
	// Run (Env: the command's, or this process's, plus EnvListeners).
	Command func() *exec.Cmd
	Log     *zap.Logger
	// MinUptime: a child that dies sooner is not restarted (it would fail
	// again: bad flags, a missing file).
	MinUptime time.Duration
	// MaxRestarts within Window: one restart more is not made.
	MaxRestarts int
	Window      time.Duration
}

// Run opens the listeners and runs children until ctx ends, when it sends
// the child SIGTERM and returns once it has exited: nil if it exited 0.
// It returns an error when a child cannot be started, exits on its own
// with status 0 (nil) or non-zero, or dies and may not be restarted.
func Run(ctx context.Context, cfg Config) error {
	if cfg.MinUptime <= 0 {
		cfg.MinUptime = DefaultMinUptime
	}
	if cfg.MaxRestarts <= 0 {
		cfg.MaxRestarts = DefaultMaxRestarts
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	// The child's death signal (childAttributes) follows the thread that
	// forked it, not the process: children are started from this thread,
	// which this goroutine keeps until Run returns, so no thread the Go
	// runtime ends or reuses takes a running server with it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	files, env, err := listen(cfg.Addresses)
	if err != nil {
		return err
	}
	defer func() { closeAll(files) }()
	var restarts []time.Time
	for {
		cmd := cfg.Command()
		cmd.ExtraFiles = files
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, EnvListeners+"="+env)
		cmd.SysProcAttr = childAttributes()
		started := time.Now()
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting the server process: %w", err)
		}
		cfg.Log.Info("server process started", zap.Int("pid", cmd.Process.Pid))
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			// The child keeps its own copies while it drains; once it
			// closes them, new connections are refused, not queued for
			// a server that is gone.
			closeAll(files)
			files = nil
			err := <-exited
			cfg.Log.Info("server process stopped", zap.String("status", cmd.ProcessState.String()))
			if endedBy(cmd.ProcessState, syscall.SIGTERM) {
				return nil // stopped before it could handle the signal: as asked
			}
			return err
		case err := <-exited:
			status := cmd.ProcessState.String()
			if err == nil {
				cfg.Log.Info("server process exited", zap.String("status", status))
				return nil
			}
			if ctx.Err() != nil {
				// Stopping: no new child.
				cfg.Log.Info("server process stopped", zap.String("status", status))
				return nil
			}
			now := time.Now()
			up := now.Sub(started)
			restarts = recent(restarts, now, cfg.Window)
			switch {
			case up < cfg.MinUptime:
				return fmt.Errorf("server process %s after %v (less than %v: not restarted): %w", status, up.Round(time.Millisecond), cfg.MinUptime, err)
			case len(restarts) >= cfg.MaxRestarts:
				return fmt.Errorf("server process %s, restarted %d times within %v already: %w", status, len(restarts), cfg.Window, err)
			}
			restarts = append(restarts, now)
			cfg.Log.Warn("server process died; starting a new one on the same listeners",
				zap.String("status", status), zap.Duration("uptime", up), zap.Int("restartsInWindow", len(restarts)))
		}
	}
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// endedBy reports whether the process was ended by signal sig.
func endedBy(state *os.ProcessState, sig syscall.Signal) bool {
	ws, ok := state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// recent keeps the times within window before now.
func recent(times []time.Time, now time.Time, window time.Duration) []time.Time {
	out := times[:0]
	for _, t := range times {
		if now.Sub(t) < window {
			out = append(out, t)
		}
	}
	return out
}

// listen opens a listener per distinct address and returns their files
// (descriptors 3, 4, ... in the child) and the EnvListeners value.
func listen(addresses []string) ([]*os.File, string, error) {
	var files []*os.File
	var pairs []string
	seen := map[string]bool{}
	for _, addr := range addresses {
		if seen[addr] {
			continue
		}
		seen[addr] = true
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			closeAll(files)
			return nil, "", fmt.Errorf("listening on %s: %w", addr, err)
		}
		f, err := ln.(*net.TCPListener).File()
		ln.Close() // the file is a duplicate: the socket stays open
		if err != nil {
			closeAll(files)
			return nil, "", fmt.Errorf("listener %s: %w", addr, err)
		}
		pairs = append(pairs, addr+"="+strconv.Itoa(3+len(files)))
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, "", errors.New("no address to listen on")
	}
	return files, strings.Join(pairs, ";"), nil
}

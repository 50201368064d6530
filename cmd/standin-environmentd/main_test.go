package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/materializeinc/orchestratord/test/program"
)

// The test binary is the stand-in when STANDIN_MAIN_TEST is set.
func TestMain(m *testing.M) {
	if os.Getenv("STANDIN_MAIN_TEST") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Playing the console, the stand-in stops as nginx does: SIGQUIT (the
// image's stop signal) finishes the request in flight, SIGTERM drops it;
// both exit 0.
func TestConsoleStopsAsNginxOnEachSignal(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = w.Write([]byte("ok"))
	}))
	defer backend.Close()
	defer close(release)
	for _, tc := range []struct {
		signal   syscall.Signal
		finishes bool
	}{{syscall.SIGQUIT, true}, {syscall.SIGTERM, false}} {
		t.Run(tc.signal.String(), func(t *testing.T) {
			addr, err := program.FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "STANDIN_MAIN_TEST=1", "STANDIN_PLAYS=console", "STANDIN_VERSION=26.35.0",
				"MZ_ENDPOINT="+backend.URL, "MZ_NGINX_LISTENER_CONFIG=listen "+addr+";")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			deadline := time.Now().Add(30 * time.Second)
			for {
				resp, err := http.Get("http://" + addr + "/")
				if err == nil {
					resp.Body.Close()
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the console never served: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			answered := make(chan int, 1)
			go func() {
				resp, err := http.Get("http://" + addr + "/api/x")
				if err != nil {
					answered <- 0
					return
				}
				resp.Body.Close()
				answered <- resp.StatusCode
			}()
			time.Sleep(300 * time.Millisecond) // the request reaches the backend
			if err := cmd.Process.Signal(tc.signal); err != nil {
				t.Fatal(err)
			}
			if tc.finishes {
				select {
				case err := <-exited:
					t.Fatalf("exited (%v) with a request in flight", err)
				case <-time.After(300 * time.Millisecond):
				}
				release <- struct{}{}
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("exit: %v, want 0", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("still running 20 s after %v, the request in flight held", tc.signal)
			}
			if code := <-answered; tc.finishes != (code == http.StatusOK) {
				t.Errorf("the request in flight was answered %d; finished: %v, want %v", code, code == http.StatusOK, tc.finishes)
			}
		})
	}
}

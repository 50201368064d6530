package clusterd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/program"
	"github.com/materializeinc/orchestratord/test/standin/ctp"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

var v26 = imageref.MustParseVersion("26.35.0")

const timely = `{"workers":1,"process":0,"addresses":["h-0.h.ns.svc.cluster.local:2103"],"arrangement_exert_proportionality":1337,"enable_zero_copy":false,"enable_zero_copy_lgalloc":false,"zero_copy_limit":null}`

func args(extra ...string) []string {
	return append([]string{
		"--storage-controller-listen-addr=0.0.0.0:2100", "--compute-controller-listen-addr=0.0.0.0:2101",
		"--internal-http-listen-addr=0.0.0.0:6878", "--environment-id=local-az1-00000000-0000-0000-0000-000000000000-0",
		"--storage-timely-config=" + timely, "--compute-timely-config=" + strings.Replace(timely, "2103", "2102", 1),
		"--secrets-reader=kubernetes", "--secrets-reader-kubernetes-context=mzcloud",
	}, extra...)
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func exitCode(t *testing.T, err error) (int, string) {
	t.Helper()
	var e *standin.ExitError
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an exit", err)
	}
	return e.Code, e.Message
}

// In a pod, the process index comes from the StatefulSet ordinal in
// HOSTNAME, as clusterd derives CLUSTERD_PROCESS; outside Kubernetes
// --process is required, as clap requires it.
func TestProcessComesFromTheHostnameInKubernetes(t *testing.T) {
	inPod := env(map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "HOSTNAME": "mzx-cluster-u1-replica-u1-gen-1-0"})
	plan, err := Check(v26, args(), inPod)
	if err != nil || plan.Process != 0 || plan.Workers != 1 {
		t.Fatalf("in a pod: %+v, %v", plan, err)
	}
	_, err = Check(v26, args(), env(nil))
	if code, msg := exitCode(t, err); code != 2 || !strings.Contains(msg, "--process <PROCESS>") {
		t.Errorf("outside a pod: %d %q", code, msg)
	}
}

// What clusterd refuses before it serves: an unknown or missing flag
// (clap, exit 2), a timely config that is not one (clap's value error with
// serde_json's message), unequal workers and a process outside the timely
// addresses (panics, exit 134).
func TestCheckRefusesAsClusterd(t *testing.T) {
	inPod := env(map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "HOSTNAME": "mzx-0"})
	for _, tc := range []struct {
		name string
		argv []string
		code int
		msg  string
	}{
		{"unknown flag", args("--bogus"), 2, "unexpected argument '--bogus'"},
		{"no environment id", func() []string {
			a := args()
			return append(a[:3], a[4:]...)
		}(), 2, "--environment-id <ENVIRONMENT_ID>"},
		{"timely config not JSON", args("--storage-timely-config=workers=1"), 2,
			"invalid value 'workers=1' for '--storage-timely-config <STORAGE_TIMELY_CONFIG>': expected value at line 1 column 1"},
		{"timely config without workers", args(`--compute-timely-config={"process":0}`), 2, "missing field `workers` at line 1 column 13"},
		{"unequal workers", args("--compute-timely-config=" + strings.Replace(timely, `"workers":1`, `"workers":2`, 1)), ExitPanic,
			"storage and compute must have equal workers-per-process"},
		{"process outside the addresses", args("--process=1"), ExitPanic, "process index 1 out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(v26, tc.argv, inPod)
			if err == nil {
				t.Fatal("accepted")
			}
			if code, msg := exitCode(t, err); code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Errorf("exit %d %q, want %d with %q", code, msg, tc.code, tc.msg)
			}
		})
	}
}

// A stand-in clusterd serves its ports: the internal HTTP probes and the
// cluster transport, reporting hydration once its dataflows hydrated; a
// port already taken is clusterd's fatal error (a panic, exit 134).
func TestServeListensWhereItsFlagsSay(t *testing.T) {
	ports, err := program.FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	plan := &Plan{Version: v26, StorageCtl: addr(0), ComputeCtl: addr(1), InternalHTTP: addr(2)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, log, plan, &ctp.Replica{DefaultHydration: 100 * time.Millisecond}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var c *ctp.Client
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if c, err = ctp.Dial(ctx, plan.ComputeCtl, "26.35.0", ""); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	defer c.Close()
	if s, err := c.Do(ctp.Command{Kind: "create-dataflows"}, time.Second); err != nil || s.Hydrated {
		t.Fatalf("%+v %v", s, err)
	}
	time.Sleep(150 * time.Millisecond)
	if s, err := c.Do(ctp.Command{Kind: "status"}, time.Second); err != nil || !s.Hydrated {
		t.Fatalf("after the default hydration: %+v %v", s, err)
	}
	resp, err := http.Get("http://" + plan.InternalHTTP + "/api/livez")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("livez: %v %v", resp, err)
	}
	resp.Body.Close()

	taken := &Plan{Version: v26, StorageCtl: plan.StorageCtl, ComputeCtl: addr(3), InternalHTTP: addr(4)}
	err = Serve(context.Background(), log, taken, &ctp.Replica{})
	if code, msg := exitCode(t, err); code != ExitPanic || !strings.Contains(msg, "clusterd: fatal: listening on "+plan.StorageCtl) {
		t.Errorf("a taken port: %d %q", code, msg)
	}
}

package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/test/controlplane"
	"github.com/materializeinc/orchestratord/test/fixture"
	"github.com/materializeinc/orchestratord/test/program"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

// Short leases keep the failover tests quick (the defaults are 15s/10s/2s);
// the retry period leaves a second of slack for a loaded CI machine, since
// takeover goes through the Lease watch and does not wait for a retry.
const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = time.Second
)

var (
	cp             *controlplane.ControlPlane
	env            *standin.Server
	controllersBin string
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "controllers-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	controllersBin = filepath.Join(dir, "controllers")
	if err := program.Build(dir, "cmd/controllers"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if cp, err = controlplane.Start(context.Background(), controlplane.Options{Audit: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cp.Stop()
	env = standin.New()
	env.AutoAdvance = true
	if _, err := env.Start("127.0.0.1:0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	return m.Run()
}

// replica is one controllers process.
type replica struct {
	identity string
	cmd      *exec.Cmd
	health   string
	log      string
	exited   chan struct{}
	exitErr  error
	exitedAt time.Time
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := program.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ns, err := kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The backend Secret the tests' Materializes name.
	if _, err := kube.CoreV1().Secrets(ns.Name).Create(context.Background(), fixture.BackendSecret(ns.Name, "backend"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fixture.KeepStatefulSetsReady(t, kube, ns.Name) // no nodes run environmentd
	return ns.Name
}

func startReplica(t *testing.T, leaseNamespace, identity string, extra ...string) *replica {
	t.Helper()
	r := &replica{identity: identity, health: freeAddr(t), exited: make(chan struct{})}
	logFile, err := os.CreateTemp(t.TempDir(), identity+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	r.log = logFile.Name()
	r.cmd = exec.Command(controllersBin,
		"--kubeconfig="+cp.KubeconfigPath,
		"--cloud-provider=local", "--region=kind",
		"--leader-election-namespace="+leaseNamespace,
		"--leader-election-identity="+identity,
		"--leader-election-lease-duration="+leaseDuration.String(),
		"--leader-election-renew-deadline="+renewDeadline.String(),
		"--leader-election-retry-period="+retryPeriod.String(),
		"--health-address="+r.health,
		"--metrics-address="+r.health, // metrics share the health port: that path is tested too
		"--profiling",
		"--environmentd-url-template="+env.URL()+"/mz{{.ResourceID}}-environmentd-{{.Generation}}",
		"--environmentd-poll-interval=100ms",
	)
	r.cmd.Args = append(r.cmd.Args, extra...)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.exitErr = r.cmd.Wait()
		r.exitedAt = time.Now()
		logFile.Close()
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGCONT)
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(30 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
		if t.Failed() {
			raw, _ := os.ReadFile(r.log)
			t.Logf("log of %s:\n%s", identity, tail(string(raw), 60))
		}
	})
	return r
}

func tail(s string, n int) string {
	lines := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			lines++
			if lines > n {
				return s[i+1:]
			}
		}
	}
	return s
}

func (r *replica) alive() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

func lease(t *testing.T, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := kubernetes.NewForConfigOrDie(cp.Config).CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func holder(t *testing.T, ns, name string) string {
	t.Helper()
	l := lease(t, ns, name)
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// get fetches a path of the replica's health/metrics port.
func (r *replica) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.health + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

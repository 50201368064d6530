package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/test/audit"
)

// clusterScript is hack/cluster/cluster.sh of this source tree.
func clusterScript() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "hack", "cluster", "cluster.sh")
}

// RestartComponents stops the node's control-plane components named (etcd,
// kube-apiserver, ...) gracefully and starts them again, returning once the
// node is Ready. Runs as root on the node.
func RestartComponents(ctx context.Context, names ...string) error {
	out, err := exec.CommandContext(ctx, clusterScript(), append([]string{"restart"}, names...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster.sh restart %s: %w\n%s", strings.Join(names, " "), err, out)
	}
	return nil
}

// KillComponents SIGKILLs the node's control-plane components named (a
// crash: etcd gets no chance to flush or close its files) and starts them
// again, returning once the node is Ready. Runs as root on the node.
func KillComponents(ctx context.Context, names ...string) error {
	return KillComponentsFor(ctx, 0, names...)
}

// KillComponentsFor is KillComponents with the components kept down for d
// before they start again: an outage, as a control-plane upgrade makes.
func KillComponentsFor(ctx context.Context, d time.Duration, names ...string) error {
	cmd := exec.CommandContext(ctx, clusterScript(), append([]string{"kill"}, names...)...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("DOWN_FOR=%d", int(d.Seconds())))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster.sh kill %s: %w\n%s", strings.Join(names, " "), err, out)
	}
	return nil
}

// AuditLog reads the API server's audit log, its rotated backup included,
// decoding only the lines that contain containing. It also returns when
// the oldest file read begins: nothing before can be checked.
func AuditLog(containing string) (events []audit.Event, since time.Time, err error) {
	out, err := exec.Command(clusterScript(), "audit-log").Output()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("cluster.sh audit-log: %w", err)
	}
	current := strings.TrimSpace(string(out))
	// The API server renames a full log to audit-<time>.log (lexical order
	// is time order) and keeps --audit-log-maxbackup of them. A rotation
	// while the files are read would hide the renamed one: then they are
	// read again.
	files := func() []string {
		backups, _ := filepath.Glob(strings.TrimSuffix(current, ".log") + "-*.log")
		slices.Sort(backups)
		return append(backups, current)
	}
	for range 3 {
		before := files()
		if since, err = audit.Begins(before[0]); err != nil {
			return nil, time.Time{}, err
		}
		events = nil
		for _, path := range before {
			read, err := audit.Read(path, containing)
			if err != nil {
				return nil, time.Time{}, err
			}
			events = append(events, read...)
		}
		if slices.Equal(before, files()) {
			return events, since, nil
		}
	}
	return nil, time.Time{}, fmt.Errorf("the audit log rotated while it was read, three times in a row")
}

// UserAgent is what a controllers pod's requests carry: its identity.
func UserAgent(pod string) string { return "orchestratord-controllers/" + pod }

// FencedWindows reads every running controllers pod's log and returns, per
// identity, the spans in which it must not have written: from the expiry of
// the Lease whose loss left it holding none (its last renewal plus
// leaseDuration, when a standby may lead) to its next acquisition, or now.
// Each pod's current container only: the chaos tests assert nothing restarted.
func (c *Clients) FencedWindows(ctx context.Context, leaseDuration time.Duration) (map[string][]audit.Window, error) {
	pods, err := c.Kube.CoreV1().Pods(OperatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controllers"})
	if err != nil {
		return nil, err
	}
	windows := map[string][]audit.Window{}
	for _, p := range pods.Items {
		raw, err := c.Kube.CoreV1().Pods(OperatorNamespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("logs of %s: %w", p.Name, err)
		}
		w, err := fencedWindows(raw, leaseDuration)
		if err != nil {
			return nil, fmt.Errorf("logs of %s: %w", p.Name, err)
		}
		if len(w) > 0 {
			windows[p.Name] = w
		}
	}
	return windows, nil
}

// logTimeLayout is zap's ISO 8601 time encoding, which the controllers use.
const logTimeLayout = "2006-01-02T15:04:05.000Z0700"

// leLogLine is the part of the leader-election log lines fencedWindows reads.
type leLogLine struct {
	TS        string `json:"ts"`
	Msg       string `json:"msg"`
	Lease     string `json:"lease"`
	RenewedAt string `json:"renewedAt"`
}

func fencedWindows(log []byte, leaseDuration time.Duration) ([]audit.Window, error) {
	held := map[string]bool{}
	var windows []audit.Window
	var open *audit.Window
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l leLogLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Lease == "" {
			continue
		}
		switch l.Msg {
		case "acquired lease":
			held[l.Lease] = true
			if open != nil {
				// Logged (to the millisecond, rounded down) before the
				// term's first write: the window never covers the term.
				at, err := time.Parse(logTimeLayout, l.TS)
				if err != nil {
					return nil, fmt.Errorf("acquired lease at %q: %w", l.TS, err)
				}
				open.To = at
				windows = append(windows, *open)
				open = nil
			}
		case "released lease", "stopped leading without releasing the lease":
			delete(held, l.Lease)
		case "lost lease":
			delete(held, l.Lease)
			renewed, err := time.Parse(time.RFC3339Nano, l.RenewedAt)
			if err != nil {
				return nil, fmt.Errorf("lost lease %s: renewedAt %q: %w", l.Lease, l.RenewedAt, err)
			}
			if len(held) == 0 {
				open = &audit.Window{From: renewed.Add(leaseDuration)}
			}
		}
	}
	if open != nil {
		open.To = time.Now().Add(time.Hour)
		windows = append(windows, *open)
	}
	return windows, sc.Err()
}

// Fence is a "lost lease" line of a controllers pod: when it fenced
// itself, and the last renewal its Lease counts from.
type Fence struct {
	Lease         string
	At, RenewedAt time.Time
}

// Fences returns the fences a controllers pod logged since since.
func (c *Clients) Fences(ctx context.Context, pod string, since time.Time) ([]Fence, error) {
	raw, err := c.Kube.CoreV1().Pods(OperatorNamespace).GetLogs(pod, &corev1.PodLogOptions{SinceTime: &metav1.Time{Time: since}}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("logs of %s: %w", pod, err)
	}
	var fences []Fence
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l leLogLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "lost lease" {
			continue
		}
		at, err := time.Parse(logTimeLayout, l.TS)
		if err != nil {
			return nil, err
		}
		renewed, err := time.Parse(time.RFC3339Nano, l.RenewedAt)
		if err != nil {
			return nil, err
		}
		fences = append(fences, Fence{Lease: l.Lease, At: at, RenewedAt: renewed})
	}
	return fences, sc.Err()
}

// PauseControllers SIGSTOPs a controllers pod's process for d, then
// continues it: a stalled node, a long GC pause or a VM migration. Its
// requests in flight hang; its lease may expire meanwhile. Runs as root.
func PauseControllers(ctx context.Context, pod string, d time.Duration) error {
	pid, err := processOf(pod)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return syscall.Kill(pid, syscall.SIGCONT)
}

// CutFromAPIServer drops every packet a controllers pod sends to the API
// server (the kubernetes Service's port 443 and the server's own 6443) in
// the pod's network namespace, as a network partition would: connections
// hang, nothing is refused. The probes from the kubelet still pass. The
// returned function restores the traffic. Runs as root on the node.
func CutFromAPIServer(pod string) (restore func() error, err error) {
	pid, err := processOf(pod)
	if err != nil {
		return nil, err
	}
	rule := []string{"OUTPUT", "-p", "tcp", "-m", "multiport", "--dports", "443,6443", "-j", "DROP"}
	iptables := func(op string) error {
		args := append([]string{"-t", strconv.Itoa(pid), "-n", "iptables", op}, rule...)
		if out, err := exec.Command("nsenter", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("nsenter %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := iptables("-I"); err != nil {
		return nil, err
	}
	return func() error { return iptables("-D") }, nil
}

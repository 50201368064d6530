package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Crash is what CrashHolder did.
type Crash struct {
	Holder string
	// Killed is when the holder's process got SIGKILL; LastRenewal is the
	// last renewal it made, which is what the lease duration counts from.
	Killed, LastRenewal time.Time
}

// CrashHolder kills the process holding a controllers Lease with SIGKILL, so
// nothing is released, and deletes its pod with grace 0 at once, so the
// kubelet does not restart it under the same identity (which would resume
// the lease): a standby has to claim the lease once it expires. The process
// is found through /proc, so this runs as root on the node.
func (c *Clients) CrashHolder(ctx context.Context, lease string) (Crash, error) {
	l, err := c.Lease(ctx, lease)
	if err != nil {
		return Crash{}, err
	}
	holder := Holder(l)
	pid, err := processOf(holder)
	if err != nil {
		return Crash{}, err
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return Crash{}, fmt.Errorf("killing %s (pid %d): %w", holder, pid, err)
	}
	zero := int64(0)
	if err := c.Kube.CoreV1().Pods(OperatorNamespace).Delete(ctx, holder, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return Crash{}, err
	}
	// Read after the kill, so no later renewal by the holder can exist.
	if l, err = c.Lease(ctx, lease); err != nil {
		return Crash{}, err
	}
	if Holder(l) != holder || l.Spec.RenewTime == nil {
		return Crash{}, fmt.Errorf("lease %s moved to %q before %s was killed", lease, Holder(l), holder)
	}
	return Crash{Holder: holder, Killed: killed, LastRenewal: l.Spec.RenewTime.Time}, nil
}

// processOf finds the controllers process of a pod on this node by the
// POD_NAME the chart puts in its environment.
func processOf(pod string) (int, error) {
	want := []byte("\x00POD_NAME=" + pod + "\x00")
	environs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, path := range environs {
		env, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		dir := filepath.Dir(path)
		comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
		if string(bytes.TrimSpace(comm)) == "controllers" && bytes.Contains(append([]byte{0}, env...), want) {
			return strconv.Atoi(filepath.Base(dir))
		}
	}
	if os.Geteuid() != 0 {
		return 0, errors.New("no process found for " + pod + ": finding it reads /proc/*/environ, which needs root on the node")
	}
	return 0, errors.New("no controllers process with POD_NAME=" + pod + " on this node")
}

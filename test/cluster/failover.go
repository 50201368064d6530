package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
)

// Lease returns one of the controllers' Leases.
func (c *Clients) Lease(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	return c.Kube.CoordinationV1().Leases(OperatorNamespace).Get(ctx, name, metav1.GetOptions{})
}

// Holder returns the lease's holder identity, "" when released.
func Holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// HeldByRunningPod returns the lease if a running controllers pod holds it.
func (c *Clients) HeldByRunningPod(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	l, err := c.Lease(ctx, name)
	if err != nil {
		return nil, err
	}
	running, err := c.Pods(ctx, ControllersDeployment)
	if err != nil {
		return nil, err
	}
	if running[Holder(l)] == "" {
		return nil, fmt.Errorf("lease %s held by %q, not a running controllers pod (%s)", name, Holder(l), Describe(running))
	}
	return l, nil
}

// WaitLeasesSpread waits until the placement moves no Lease: each of the
// three is held by a running controllers pod, and none of these leads two
// more than another (pkg/leaderelection/spread hands a Lease over then).
// A hand-over landing between the read of a holder and its kill would move
// the Lease away from the victim, and the failover measured would be none.
// It assumes every pod campaigns for every Lease, as the chart's do.
func (c *Clients) WaitLeasesSpread(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		running, err := c.Pods(ctx, ControllersDeployment)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		led := make(map[string]int, len(running))
		for pod := range running {
			led[pod] = 0
		}
		for _, name := range []string{leaderelection.LeaseMaterialize, leaderelection.LeaseBalancer, leaderelection.LeaseConsole} {
			l, err := c.Lease(ctx, name)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if _, ok := led[Holder(l)]; !ok {
				last = fmt.Sprintf("lease %s held by %q, not a running controllers pod", name, Holder(l))
				return false, nil
			}
			led[Holder(l)]++
		}
		most, least := 0, len(led)*3
		for _, n := range led {
			most, least = max(most, n), min(least, n)
		}
		last = fmt.Sprintf("Leases led per controllers pod: %v", led)
		return most-least <= 1, nil
	})
	if err != nil {
		return fmt.Errorf("the Leases not spread over the controllers pods within %v (%s): %w", timeout, last, err)
	}
	return nil
}

// watchLease calls each with every version of the lease after
// resourceVersion until each is done or fails, or ctx ends.
func (c *Clients) watchLease(ctx context.Context, name, resourceVersion string, each func(*coordinationv1.Lease) (done bool, err error)) error {
	w, err := c.Kube.CoordinationV1().Leases(OperatorNamespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + name, ResourceVersion: resourceVersion,
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		l, ok := ev.Object.(*coordinationv1.Lease)
		if !ok {
			return fmt.Errorf("watching lease %s: %v", name, ev.Object)
		}
		if done, err := each(l); done || err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("the watch of lease %s ended", name)
}

// Handover is what DeleteHolder saw. Released is stamped by the releasing
// holder (a released lease's renewTime), Acquired by the new holder.
type Handover struct {
	Holder, NewHolder           string
	Deleted, Released, Acquired time.Time
}

// DeleteHolder deletes the pod holding a controllers Lease (the kubelet sends
// SIGTERM, the holder stops its reconcilers and releases the lease) and
// waits until another replica acquires it. A handover without a release is
// an error: that would be a standby claiming an expired lease.
func (c *Clients) DeleteHolder(ctx context.Context, lease string, timeout time.Duration) (Handover, error) {
	held, err := c.HeldByRunningPod(ctx, lease)
	if err != nil {
		return Handover{}, err
	}
	h := Handover{Holder: Holder(held)}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h.Deleted = time.Now()
	if err := c.Kube.CoreV1().Pods(OperatorNamespace).Delete(ctx, h.Holder, metav1.DeleteOptions{}); err != nil {
		return h, err
	}
	// Watching from the version read before the delete replays every later
	// one, the short-lived released version included.
	err = c.watchLease(ctx, lease, held.ResourceVersion, func(l *coordinationv1.Lease) (bool, error) {
		switch holder := Holder(l); {
		case holder == "" && h.Released.IsZero() && l.Spec.RenewTime != nil:
			h.Released = l.Spec.RenewTime.Time
		case holder != "" && holder != h.Holder && l.Spec.AcquireTime != nil:
			if h.Released.IsZero() {
				return false, fmt.Errorf("lease %s moved from %s to %s without a release", lease, h.Holder, holder)
			}
			h.NewHolder, h.Acquired = holder, l.Spec.AcquireTime.Time
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return h, fmt.Errorf("deleting %s, the holder of %s: %w", h.Holder, lease, err)
	}
	return h, nil
}

// Crash is what CrashHolder did.
type Crash struct {
	Holder string
	// Killed is when the holder's process got SIGKILL; LastRenewal is the
	// last renewal it made, which is what the lease duration counts from.
	Killed, LastRenewal time.Time
	// resourceVersion of the lease read after the kill.
	resourceVersion string
}

// CrashHolder kills the process holding a controllers Lease with SIGKILL, so
// nothing is released, and deletes its pod with grace 0 at once, so that the
// kubelet does not restart it under the same identity (which would resume
// the lease): a standby has to claim the lease once it expires. The process
// is found through /proc, so this runs as root on the node.
func (c *Clients) CrashHolder(ctx context.Context, lease string) (Crash, error) {
	l, err := c.HeldByRunningPod(ctx, lease)
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
	if l, err = c.Lease(ctx, lease); err != nil {
		return Crash{}, err
	}
	if Holder(l) != holder || l.Spec.RenewTime == nil {
		return Crash{}, fmt.Errorf("lease %s moved to %q before %s was killed", lease, Holder(l), holder)
	}
	return Crash{Holder: holder, Killed: killed, LastRenewal: l.Spec.RenewTime.Time, resourceVersion: l.ResourceVersion}, nil
}

// WaitClaimed waits until another replica holds the lease after a
// CrashHolder. A renewal by the killed holder stamped before the kill was
// in flight when the lease was read, and becomes the last renewal. A write
// stamped after the kill as the killed identity, or a release, means its
// pod came back under the same identity: an error.
func (c *Clients) WaitClaimed(ctx context.Context, lease string, crash *Crash, timeout time.Duration) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var claimed *coordinationv1.Lease
	err := c.watchLease(ctx, lease, crash.resourceVersion, func(l *coordinationv1.Lease) (bool, error) {
		switch holder := Holder(l); {
		case (holder == crash.Holder || holder == "") && l.Spec.RenewTime != nil && l.Spec.RenewTime.Time.After(crash.LastRenewal):
			if !l.Spec.RenewTime.Time.Before(crash.Killed) {
				return false, fmt.Errorf("lease %s written by %q at %v, after %s was killed at %v", lease, holder, l.Spec.RenewTime.Time, crash.Holder, crash.Killed)
			}
			crash.LastRenewal = l.Spec.RenewTime.Time
		case holder != "" && holder != crash.Holder && l.Spec.AcquireTime != nil:
			claimed = l
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("after the crash of %s: %w", crash.Holder, err)
	}
	return claimed, nil
}

// processOf finds the controllers process of a pod on this node by the
// POD_NAME the chart puts in its environment.
func processOf(pod string) (int, error) {
	want := []byte("\x00POD_NAME=" + pod + "\x00")
	return findProcess("controllers", func(dir string) bool {
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		return err == nil && bytes.Contains(append([]byte{0}, env...), want)
	})
}

// LeaderElectionTimings reads the lease duration and retry period the
// installed controllers run with, from their Deployment's arguments (the
// chart always sets both), so that bounds follow the installed values.
func (c *Clients) LeaderElectionTimings(ctx context.Context) (leaseDuration, retryPeriod time.Duration, err error) {
	d, err := c.Kube.AppsV1().Deployments(OperatorNamespace).Get(ctx, ControllersDeployment, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	for _, container := range d.Spec.Template.Spec.Containers {
		for _, arg := range container.Args {
			name, value, _ := strings.Cut(arg, "=")
			var into *time.Duration
			switch name {
			case "--leader-election-lease-duration":
				into = &leaseDuration
			case "--leader-election-retry-period":
				into = &retryPeriod
			default:
				continue
			}
			if *into, err = time.ParseDuration(value); err != nil {
				return 0, 0, fmt.Errorf("%s: %w", arg, err)
			}
		}
	}
	if leaseDuration == 0 || retryPeriod == 0 {
		return 0, 0, fmt.Errorf("deployment %s sets no --leader-election-lease-duration or --leader-election-retry-period", ControllersDeployment)
	}
	return leaseDuration, retryPeriod, nil
}

// KillHolder SIGKILLs the process holding a controllers Lease and leaves its
// pod to the kubelet, as a crash or an OOM kill does: the kubelet reports
// the container terminated and restarts it in the same pod. With wholePod,
// every process of the pod dies at once, its sandbox included (a pod killed
// whole, as by a node's OOM killer), and the kubelet recreates the sandbox.
// Nothing is released. Runs as root on the node.
func (c *Clients) KillHolder(ctx context.Context, lease string, wholePod bool) (Crash, error) {
	// A Lease being handed over (placement) is released for a moment.
	var l *coordinationv1.Lease
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		l, err = c.HeldByRunningPod(ctx, lease)
		return err == nil, nil
	})
	if err != nil {
		if l, err = c.HeldByRunningPod(ctx, lease); err != nil {
			return Crash{}, err
		}
	}
	held := l
	holder := Holder(l)
	var pids []int
	if wholePod {
		pod, err := c.Kube.CoreV1().Pods(OperatorNamespace).Get(ctx, holder, metav1.GetOptions{})
		if err != nil {
			return Crash{}, err
		}
		if pids, err = processesOfPod(string(pod.UID)); err != nil {
			return Crash{}, err
		}
	} else {
		pid, err := processOf(holder)
		if err != nil {
			return Crash{}, err
		}
		pids = []int{pid}
	}
	killed := time.Now()
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return Crash{}, fmt.Errorf("killing %s (pid %d): %w", holder, pid, err)
		}
	}
	if l, err = c.Lease(ctx, lease); err != nil {
		return Crash{}, err
	}
	lastRenewal := held.Spec.RenewTime.Time
	if Holder(l) == holder && l.Spec.RenewTime != nil {
		lastRenewal = l.Spec.RenewTime.Time
	}
	// The new term is looked for from the Lease as read before the kill,
	// so a standby's quick claim is seen, and so is a release: a process
	// killed cannot release, so a release is a hand-over begun before the
	// kill (WaitNewTerm fails on it).
	return Crash{Holder: holder, Killed: killed, LastRenewal: lastRenewal, resourceVersion: held.ResourceVersion}, nil
}

// WaitNewTerm waits until a term of lease begins after crash: a standby's,
// or that of the holder's own process restarted in its pod. Its
// acquireTime is stamped by the new holder (on this one node's clock).
func (c *Clients) WaitNewTerm(ctx context.Context, lease string, crash Crash, timeout time.Duration) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var began *coordinationv1.Lease
	err := c.watchLease(ctx, lease, crash.resourceVersion, func(l *coordinationv1.Lease) (bool, error) {
		if Holder(l) == "" {
			return false, fmt.Errorf("lease %s released: a hand-over of %s's, not a crash (a killed process releases nothing)", lease, crash.Holder)
		}
		if l.Spec.AcquireTime != nil && l.Spec.AcquireTime.Time.After(crash.Killed) {
			began = l
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("after the kill of %s: %w", crash.Holder, err)
	}
	return began, nil
}

// processesOfPod lists every process in the cgroups of the pod with the
// given UID: its containers' and its sandbox's.
func processesOfPod(podUID string) ([]int, error) {
	forms := [][]byte{[]byte(podUID), []byte(strings.ReplaceAll(podUID, "-", "_"))} // cgroupfs, systemd
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, dir := range dirs {
		cgroup, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil || !(bytes.Contains(cgroup, forms[0]) || bytes.Contains(cgroup, forms[1])) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(dir)); err == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("no process of pod %s on this node (finding them reads /proc, which needs root)", podUID)
	}
	return pids, nil
}

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

	"github.com/materializeinc/orchestratord/test/program"
)

// APIServerOutage makes the node's kube-apiserver unresponsive for d: the
// process is stopped (SIGSTOP), so connections hang as in a network
// partition or an overloaded server, then continued. It returns when the
// process has been continued. Runs as root on the node.
func APIServerOutage(ctx context.Context, d time.Duration) (stopped, resumed time.Time, err error) {
	pid, err := processNamed("kube-apiserver")
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("stopping kube-apiserver (pid %d): %w", pid, err)
	}
	stopped = time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return stopped, time.Time{}, fmt.Errorf("continuing kube-apiserver (pid %d): %w", pid, err)
	}
	return stopped, time.Now(), ctx.Err()
}

// processNamed finds the process whose command is name on this node.
func processNamed(name string) (int, error) {
	return findProcess(name, func(string) bool { return true })
}

// findProcess finds the process whose command is comm and whose /proc
// directory satisfies match. Reading other processes' /proc entries needs
// root on the node.
func findProcess(comm string, match func(procDir string) bool) (int, error) {
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, path := range comms {
		name, err := os.ReadFile(path)
		if err == nil && string(bytes.TrimSpace(name)) == comm && match(filepath.Dir(path)) {
			return strconv.Atoi(filepath.Base(filepath.Dir(path)))
		}
	}
	if os.Geteuid() != 0 {
		return 0, errors.New("no " + comm + " process found: finding it reads /proc, which needs root on the node")
	}
	return 0, errors.New("no matching " + comm + " process on this node")
}

// Process is a process of a pod, with when it started.
type Process struct {
	PID int
	// Started is its start time (clock ticks since boot).
	Started uint64
}

// KillContainer SIGKILLs the newest process named comm in the pod with the
// given UID (found through its cgroup), as an OOM kill or a node problem
// would: nothing drains. Under a supervisor (the webhook's --supervise) that
// is the server, not the supervisor holding its sockets. Runs as root on
// the node.
func KillContainer(podUID, comm string) (Process, error) {
	procs, err := processesNamed(podUID, comm)
	if err != nil {
		return Process{}, err
	}
	var victim Process
	for _, p := range procs {
		if victim.PID == 0 || p.Started > victim.Started {
			victim = p
		}
	}
	if victim.PID == 0 {
		return Process{}, fmt.Errorf("pod %s: no %s process", podUID, comm)
	}
	return victim, syscall.Kill(victim.PID, syscall.SIGKILL)
}

// StartedSince reports whether a process named comm started after k runs
// in the pod with the given UID: k's replacement.
func StartedSince(podUID, comm string, k Process) bool {
	procs, _ := processesNamed(podUID, comm)
	for _, p := range procs {
		if p.Started > k.Started && p.PID != k.PID {
			return true
		}
	}
	return false
}

// WaitProcessOlder waits until the newest process named comm in the pod with
// the given UID has run for at least age. Runs as root on the node.
func WaitProcessOlder(ctx context.Context, podUID, comm string, age time.Duration) error {
	for {
		procs, err := processesNamed(podUID, comm)
		if err != nil {
			return err
		}
		uptime, err := os.ReadFile("/proc/uptime")
		if err != nil {
			return err
		}
		up, err := strconv.ParseFloat(strings.Fields(string(uptime))[0], 64)
		if err != nil {
			return err
		}
		var newest uint64
		for _, p := range procs {
			newest = max(newest, p.Started)
		}
		// Start times are in clock ticks: 100 a second on Linux (USER_HZ).
		running := time.Duration((up - float64(newest)/100) * float64(time.Second))
		if len(procs) > 0 && running >= age {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(max(100*time.Millisecond, age-running)):
		}
	}
}

// processesNamed lists the processes named comm in the pod, with their
// start times.
func processesNamed(podUID, comm string) ([]Process, error) {
	pids, err := processesOfPod(podUID)
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid))
		name, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || string(bytes.TrimSpace(name)) != comm {
			continue
		}
		if started, err := startTime(pid); err == nil {
			out = append(out, Process{PID: pid, Started: started})
		}
	}
	return out, nil
}

// startTime is a process's start time (clock ticks since boot), field 22
// of /proc/<pid>/stat.
func startTime(pid int) (uint64, error) {
	fields, err := program.ProcStat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(fields[19], 10, 64) // field 22: starttime
}

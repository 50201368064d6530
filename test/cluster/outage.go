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

// KillContainer SIGKILLs the process named comm in the pod with the given
// UID (found through its cgroup), as an OOM kill or a node problem would:
// nothing drains. Runs as root on the node.
func KillContainer(podUID, comm string) error {
	forms := [][]byte{[]byte(podUID), []byte(strings.ReplaceAll(podUID, "-", "_"))} // cgroupfs, systemd
	pid, err := findProcess(comm, func(dir string) bool {
		cgroup, _ := os.ReadFile(filepath.Join(dir, "cgroup"))
		return bytes.Contains(cgroup, forms[0]) || bytes.Contains(cgroup, forms[1])
	})
	if err != nil {
		return fmt.Errorf("pod %s: %w", podUID, err)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

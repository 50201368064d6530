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

func processNamed(name string) (int, error) {
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, path := range comms {
		comm, err := os.ReadFile(path)
		if err == nil && string(bytes.TrimSpace(comm)) == name {
			return strconv.Atoi(filepath.Base(filepath.Dir(path)))
		}
	}
	if os.Geteuid() != 0 {
		return 0, errors.New("no " + name + " process found: this runs as root on the node")
	}
	return 0, errors.New("no " + name + " process on this node")
}

// KillContainer SIGKILLs the process named comm in the pod with the given
// UID (found through its cgroup), as an OOM kill or a node problem would:
// nothing drains. Runs as root on the node.
func KillContainer(podUID, comm string) error {
	forms := []string{podUID, strings.ReplaceAll(podUID, "-", "_")} // cgroupfs, systemd
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, path := range comms {
		name, err := os.ReadFile(path)
		if err != nil || string(bytes.TrimSpace(name)) != comm {
			continue
		}
		dir := filepath.Dir(path)
		cgroup, _ := os.ReadFile(filepath.Join(dir, "cgroup"))
		for _, f := range forms {
			if bytes.Contains(cgroup, []byte(f)) {
				pid, _ := strconv.Atoi(filepath.Base(dir))
				return syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	return fmt.Errorf("no %s process of pod %s on this node (this runs as root on the node)", comm, podUID)
}

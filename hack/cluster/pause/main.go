// Command pause is the sandbox ("pause") container of the local cluster
// (hack/cluster): it holds a pod's namespaces open, reaps any child that is
// reparented to it as PID 1, and exits 0 on SIGTERM or SIGINT. It is built
// as a static binary and packed into an OCI image by hack/cluster/image, so
// the cluster never pulls an image from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}

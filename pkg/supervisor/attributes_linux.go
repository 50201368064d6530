package supervisor

import "syscall"

// childAttributes makes the child get SIGTERM (and drain) if the
// supervisor dies without forwarding one: no server outlives it. (In a
// container the kernel kills the child with the container's first process
// anyway.)
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

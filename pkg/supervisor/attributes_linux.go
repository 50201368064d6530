package supervisor

import "syscall"

// childAttributes makes the child get SIGTERM (and drain) when the
// supervisor's thread that started it ends, which in a Go program is when
// the supervisor dies: outside a container no server outlives it. (In a
// container the kernel kills the child with the container's first process
// anyway.)
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

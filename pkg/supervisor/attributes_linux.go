package supervisor

import "syscall"

// childAttributes makes the child get SIGTERM (and drain) when the
// supervisor's thread that started it ends. Run keeps that thread for as
// long as it runs (runtime.LockOSThread), so that is when the supervisor
// dies: outside a container no server outlives it. (In a container the
// kernel kills the child with the container's first process anyway.)
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

//go:build !linux

package supervisor

import "syscall"

func childAttributes() *syscall.SysProcAttr { return nil }

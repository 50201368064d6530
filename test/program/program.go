// Package program builds the project's commands, as they run in a pod, for
// tests and benchmarks that run them as processes, and finds free loopback
// addresses to point them at.
package program

import (
	"fmt"
	"net"
	"os"
	"os/exec"
)

// Module is the import path prefix of the project's commands.
const Module = "github.com/materializeinc/orchestratord/"

// Build compiles the commands (e.g. "cmd/webhook") into dir, each as a
// binary named after its last path element.
func Build(dir string, commands ...string) error {
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, c := range commands {
		args = append(args, Module+c)
	}
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %v: %w", commands, err)
	}
	return nil
}

// FreeAddr returns a loopback address with a port free at the moment.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Package program builds the project's commands, as they run in a pod, for
// tests and benchmarks that run them as processes, finds free loopback
// addresses to point them at, and reads their metrics.
package program

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// FreeAddr returns a loopback address with a port free at the moment,
// for a process started next to bind (FreePorts).
func FreeAddr() (string, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(ports[0]), nil
}

// Ports are picked below the kernel's ephemeral range and the NodePort
// range: the listener that found a port free is closed before the process
// binds it, and meanwhile a port from the ephemeral range can go to any
// connection the machine opens, while one from here goes only to a
// program that binds it by number.
const (
	lowestPort     = 10000
	lowestNodePort = 30000
)

// FreePorts returns n distinct loopback ports free at the moment.
func FreePorts(n int) ([]int, error) {
	high := highestPort()
	ports := make([]int, 0, n)
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("no %d free loopback ports between %d and %d", n, lowestPort, high)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(lowestPort+rand.IntN(high-lowestPort)))
		if err != nil {
			continue // taken
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// highestPort bounds the ports picked (exclusive): the NodePort range, or
// the ephemeral range when it starts lower, unless that would leave fewer
// than a thousand.
func highestPort() int {
	high := lowestNodePort
	if low := ephemeralLow(); low > lowestPort+1000 && low < high {
		high = low
	}
	return high
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	const linuxDefault = 32768
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return linuxDefault
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return linuxDefault
	}
	return low
}

// Metric scrapes http://addr/metrics and sums the series named name whose
// labels include every one of labels (each written as in the exposition,
// `controller="materialize"`). It is an error when no such series exists.
func Metric(addr, name string, labels ...string) (float64, error) {
	e, err := Scrape(addr)
	if err != nil {
		return 0, err
	}
	return e.Sum(name, labels...)
}

// Exposition is one scrape of a /metrics endpoint, in Prometheus' text
// format: figures read from one scrape describe one moment.
type Exposition struct {
	addr string
	text string
}

// Scrape reads http://addr/metrics.
func Scrape(addr string) (Exposition, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return Exposition{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Exposition{}, err
	}
	return Exposition{addr: addr, text: string(raw)}, nil
}

// Sum is Metric's sum over this scrape.
func (e Exposition) Sum(name string, labels ...string) (float64, error) {
	var sum float64
	found := false
	for _, line := range strings.Split(e.text, "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		seriesName, seriesLabels, _ := strings.Cut(series, "{")
		if seriesName != name || !containsAll(seriesLabels, labels) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", series, err)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("%s exports no %s%v", e.addr, name, labels)
	}
	return sum, nil
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// ProcStat returns the fields of /proc/<pid>/stat that follow the command
// name, so that field N of proc(5) is at index N-3 (state is 0, utime 11,
// stime 12, starttime 19). The name, in parentheses, may hold spaces and
// parentheses: the fields start after its last ')'.
func ProcStat(pid int) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(raw)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 20", pid, len(fields))
	}
	return fields, nil
}

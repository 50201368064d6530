package clusterd

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

// Usage is clusterd's answer on /api/usage-metrics.
type Usage = standin.ClusterdUsage

// usageFS is where the collector reads the kernel's figures (tests point it
// at a directory of their own).
type usageFS struct {
	proc, cgroup string
}

var hostFS = usageFS{proc: "/proc", cgroup: "/sys/fs/cgroup"}

// collectUsage measures as upstream's Collector does.
func collectUsage(fs usageFS, scratch string) Usage {
	var u Usage
	if scratch != "" {
		var st syscall.Statfs_t
		if syscall.Statfs(scratch, &st) == nil {
			used := (st.Blocks - st.Bavail) * uint64(st.Frsize)
			u.DiskBytes = &used
		}
	}
	if status, err := os.ReadFile(filepath.Join(fs.proc, "self/status")); err == nil {
		u.MemoryBytes, u.SwapBytes = kibField(status, "VmRSS:"), kibField(status, "VmSwap:")
	}
	meminfo, err := os.ReadFile(filepath.Join(fs.proc, "meminfo"))
	if err != nil {
		return u
	}
	mem, swap := kibField(meminfo, "MemTotal:"), kibField(meminfo, "SwapTotal:")
	if mem == nil || swap == nil {
		return u
	}
	memLimit, swapLimit := *mem, *swap
	if dir := cgroupDir(fs); dir != "" {
		memLimit = min(memLimit, cgroupLimit(filepath.Join(dir, "memory.max")))
		swapLimit = min(swapLimit, cgroupLimit(filepath.Join(dir, "memory.swap.max")))
	}
	limit := memLimit + swapLimit
	u.HeapLimit = &limit
	return u
}

// kibField is a "Name: N kB" line of a /proc file, in bytes.
func kibField(data []byte, name string) *uint64 {
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) >= 2 && f[0] == name {
			if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				n *= 1024
				return &n
			}
		}
	}
	return nil
}

// cgroupDir is the process's cgroup v2 directory, or "".
func cgroupDir(fs usageFS) string {
	data, err := os.ReadFile(filepath.Join(fs.proc, "self/cgroup"))
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(fs.cgroup, strings.TrimPrefix(p, "/"))
		}
	}
	return ""
}

// cgroupLimit is a cgroup limit file's value; "max" or an unreadable file
// is no limit.
func cgroupLimit(path string) uint64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return ^uint64(0)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return ^uint64(0)
	}
	return n
}

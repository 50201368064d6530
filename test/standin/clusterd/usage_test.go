package clusterd

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCollectUsageReadsTheKernelAsClusterdDoes(t *testing.T) {
	root := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/self/status", "Name:\tclusterd\nVmRSS:\t   2048 kB\nVmSwap:\t      4 kB\n")
	write("proc/meminfo", "MemTotal:       8000000 kB\nSwapTotal:            0 kB\n")
	write("proc/self/cgroup", "0::/kubepods/pod1/c1\n")
	write("cgroup/kubepods/pod1/c1/memory.max", "67108864\n")
	write("cgroup/kubepods/pod1/c1/memory.swap.max", "max\n")
	fs := usageFS{proc: filepath.Join(root, "proc"), cgroup: filepath.Join(root, "cgroup")}

	u := collectUsage(fs, root)
	for name, got := range map[string]*uint64{"memory_bytes": u.MemoryBytes, "swap_bytes": u.SwapBytes, "heap_limit": u.HeapLimit, "disk_bytes": u.DiskBytes} {
		if got == nil {
			t.Fatalf("%s is null", name)
		}
	}
	if *u.MemoryBytes != 2048*1024 || *u.SwapBytes != 4*1024 {
		t.Errorf("memory %d swap %d, want VmRSS and VmSwap in bytes", *u.MemoryBytes, *u.SwapBytes)
	}
	// The cgroup's 64 MiB caps memory; swap is the machine's (none).
	if *u.HeapLimit != 64<<20 {
		t.Errorf("heap limit %d, want the cgroup's memory.max", *u.HeapLimit)
	}

	u = collectUsage(usageFS{proc: filepath.Join(root, "none"), cgroup: root}, "")
	if u.DiskBytes != nil || u.MemoryBytes != nil || u.HeapLimit != nil {
		t.Errorf("unreadable figures must be null, got %+v", u)
	}
}

// Package rustsrctest writes the fixture source trees that tests of code
// reading upstream through hack/internal/rustsrc read.
package rustsrctest

import (
	"os"
	"path/filepath"
	"testing"
)

// Write writes files (slash-separated path relative to dir -> content)
// under dir, making the directories they need.
func Write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Tree writes files under a new temporary directory and returns it.
func Tree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	Write(t, dir, files)
	return dir
}

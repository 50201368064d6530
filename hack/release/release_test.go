package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// TestReleaseIsReproducible builds the release twice, from two copies of the
// source in different directories into different output directories, and
// wants the same bytes: every digest, SBOM and the chart. It then verifies the
// build (each SBOM lists exactly what Go linked into its binary) and pushes
// it to an in-process registry, which must list each SBOM as a referrer of
// its image. Nothing leaves the machine. The release command runs as users
// run it, outside the race detector, which would slow its compression
// tenfold. Cross-compiling both programs for two architectures is cheap once
// Go's build cache holds them (-trimpath keeps the source directory out of
// its keys); the first run compiles for arm64.
func TestReleaseIsReproducible(t *testing.T) {
	// Cold, the two architectures' builds cost minutes of CI's budget that
	// make test cannot spare: make release-check runs it, and the release
	// workflow builds twice and compares before publishing.
	if os.Getenv("ORCHESTRATORD_RELEASE_TEST") == "" {
		t.Skip("cross-compiles both programs twice: make release-check (ORCHESTRATORD_RELEASE_TEST=1)")
	}
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	out, err := exec.Command(filepath.Join(root, "hack", "kube-binaries.sh"), "helm").Output()
	if err != nil {
		t.Fatalf("hack/kube-binaries.sh helm: %v", err)
	}
	helm := filepath.Join(strings.TrimSpace(string(out)), "helm")
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")

	tmp := t.TempDir()
	srcA, srcB := filepath.Join(tmp, "a", "src"), filepath.Join(tmp, "b", "elsewhere")
	snapshot(t, root, srcA)
	// The second copy is of the first: concurrent edits of the work tree
	// cannot tell the two builds apart.
	if err := os.CopyFS(srcB, os.DirFS(srcA)); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(tmp, "release")
	run(t, srcA, "go", "build", "-trimpath", "-o", tool, "./hack/release")
	outs := []string{filepath.Join(tmp, "a", "release"), filepath.Join(tmp, "b", "out")}
	for i, src := range []string{srcA, srcB} {
		start := time.Now()
		run(t, src, tool, "build", "-source", src, "-out", outs[i], "-registry", host, "-helm", helm,
			"-build-version", "v0.0.0-test", "-source-date-epoch", "1700000000")
		t.Logf("build %d took %s", i+1, time.Since(start).Round(time.Millisecond))
	}
	a, b := tree(t, outs[0]), tree(t, outs[1])
	for name, sum := range a {
		if sum != b[name] {
			t.Errorf("%s differs between the two builds", name)
		}
	}
	if len(a) != len(b) {
		t.Errorf("the builds wrote %d and %d files", len(a), len(b))
	}
	if t.Failed() {
		t.FailNow()
	}

	// push and verify check each SBOM against its binary's build
	// information; here, that the SBOMs name the module and what it is known
	// to link.
	rel, err := readRelease(outs[0])
	if err != nil {
		t.Fatal(err)
	}
	module, err := modulePath(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range rel.Images {
		if len(img.Platforms) != 2 {
			t.Fatalf("%s has %d platform images", img.Name, len(img.Platforms))
		}
		for _, p := range img.Platforms {
			doc, err := os.ReadFile(filepath.Join(outs[0], p.SBOM.File))
			if err != nil {
				t.Fatal(err)
			}
			var bom cdxBOM
			if err := json.Unmarshal(doc, &bom); err != nil {
				t.Fatal(err)
			}
			if bom.Metadata.Component.Name != module {
				t.Errorf("%s: application %q, want %q", p.SBOM.File, bom.Metadata.Component.Name, module)
			}
			names := map[string]bool{}
			for _, c := range bom.Components {
				names[c.Name] = true
			}
			for _, dep := range []string{"k8s.io/client-go", "k8s.io/apimachinery", "github.com/spf13/cobra", "go.uber.org/zap", "stdlib"} {
				if !names[dep] {
					t.Errorf("%s lists no %s", p.SBOM.File, dep)
				}
			}
		}
	}

	// Pushing is refused where the chart would not point, before anything is sent.
	if err := push(context.Background(), outs[0], "other."+host, "", io.Discard); err == nil || !strings.Contains(err.Error(), "was built for registry") {
		t.Errorf("pushing a build for another registry: %v", err)
	}
	// As CI does: credentials into a Docker config of its own, which push's
	// default keychain reads (this registry takes any).
	t.Setenv("DOCKER_CONFIG", filepath.Join(tmp, "docker"))
	login := exec.Command(tool, "login", "-registry", host, "-username", "ci")
	login.Stdin, login.Stderr = strings.NewReader("secret\n"), t.Output()
	if err := login.Run(); err != nil {
		t.Fatalf("release login: %v", err)
	}
	var cfg struct {
		Auths map[string]struct{ Auth string }
	}
	if b, err := os.ReadFile(filepath.Join(tmp, "docker", "config.json")); err != nil || json.Unmarshal(b, &cfg) != nil || cfg.Auths[host].Auth == "" {
		t.Fatalf("release login wrote no credentials for %s: %v %+v", host, err, cfg)
	}
	start := time.Now()
	run(t, srcA, tool, "push", "-dir", outs[0], "-registry", host)
	run(t, srcA, tool, "verify", "-dir", outs[0], "-remote")
	t.Logf("push and verify took %s", time.Since(start).Round(time.Millisecond))
}

func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
}

// snapshot copies the work tree's files that git tracks or would track (the
// same as the build would see, without .git, bin/ and other ignored output)
// into dst.
func snapshot(t *testing.T, root, dst string) {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted, not yet committed
			}
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// tree is the SHA-256 of every file under dir by its relative path.
func tree(t *testing.T, dir string) map[string][sha256.Size]byte {
	t.Helper()
	files := map[string][sha256.Size]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = [sha256.Size]byte(h.Sum(nil))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

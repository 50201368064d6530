// Copied from hack/gen-standin-args (source.go), with filesUnder added.

package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// upstream reads files of the Materialize source: from a git repository (a
// work tree or a bare repository) at a commit, or from a plain directory.
type upstream struct {
	dir    string
	commit string // "" for a plain directory
	cache  map[string][]byte
	rsList []string // every .rs file under src/, lazily
}

// openUpstream opens dir: a bare repository or a checkout (dir/.git) is read
// through git at commit (default HEAD); anything else must be a source tree
// with src/, and commit only labels the output.
func openUpstream(dir, commit string) (*upstream, error) {
	u := &upstream{dir: dir, cache: map[string][]byte{}}
	bare, _ := exec.Command("git", "-C", dir, "rev-parse", "--is-bare-repository").Output()
	_, dotGit := os.Stat(filepath.Join(dir, ".git"))
	if strings.TrimSpace(string(bare)) == "true" || dotGit == nil {
		rev := commit
		if rev == "" {
			rev = "HEAD"
		}
		full, err := exec.Command("git", "-C", dir, "rev-parse", "--verify", rev+"^{commit}").Output()
		if err != nil {
			return nil, fmt.Errorf("resolving %s in %s: %v", rev, dir, err)
		}
		u.commit = strings.TrimSpace(string(full))
		return u, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "src")); err != nil {
		return nil, fmt.Errorf("%s is neither a git repository nor a source tree with src/", dir)
	}
	if commit == "" {
		return nil, fmt.Errorf("-commit is required for a source tree that is not a git repository")
	}
	return u, nil
}

// read returns a file's content; the path is relative to the repository root.
func (u *upstream) read(p string) ([]byte, error) {
	if b, ok := u.cache[p]; ok {
		return b, nil
	}
	var b []byte
	var err error
	if u.commit != "" {
		var stderr bytes.Buffer
		cmd := exec.Command("git", "-C", u.dir, "show", u.commit+":"+p)
		cmd.Stderr = &stderr
		b, err = cmd.Output()
		if err != nil {
			err = fmt.Errorf("git show %s:%s: %v: %s", u.commit, p, err, strings.TrimSpace(stderr.String()))
		}
	} else {
		b, err = os.ReadFile(filepath.Join(u.dir, filepath.FromSlash(p)))
	}
	if err != nil {
		return nil, err
	}
	u.cache[p] = b
	return b, nil
}

func (u *upstream) exists(p string) bool {
	if u.commit != "" {
		return exec.Command("git", "-C", u.dir, "cat-file", "-e", u.commit+":"+p).Run() == nil
	}
	_, err := os.Stat(filepath.Join(u.dir, filepath.FromSlash(p)))
	return err == nil
}

// rustFiles lists the .rs files under src/.
func (u *upstream) rustFiles() ([]string, error) {
	if u.rsList != nil {
		return u.rsList, nil
	}
	var files []string
	if u.commit != "" {
		out, err := exec.Command("git", "-C", u.dir, "ls-tree", "-r", "--name-only", u.commit, "--", "src").Output()
		if err != nil {
			return nil, fmt.Errorf("git ls-tree: %v", err)
		}
		for _, f := range strings.Split(string(out), "\n") {
			if strings.HasSuffix(f, ".rs") {
				files = append(files, f)
			}
		}
	} else {
		root := filepath.Join(u.dir, "src")
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "target" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ".rs") {
				rel, _ := filepath.Rel(u.dir, p)
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	u.rsList = files
	return files, nil
}

// crateDir returns the directory of the Cargo package containing file.
func (u *upstream) crateDir(file string) (string, error) {
	for d := path.Dir(file); d != "." && d != "/"; d = path.Dir(d) {
		if u.exists(d + "/Cargo.toml") {
			return d, nil
		}
	}
	return "", fmt.Errorf("no Cargo.toml above %s", file)
}

// filesUnder lists the files under dir (relative to the repository root)
// whose names end in suffix.
func (u *upstream) filesUnder(dir, suffix string) ([]string, error) {
	var files []string
	if u.commit != "" {
		out, err := exec.Command("git", "-C", u.dir, "ls-tree", "-r", "--name-only", u.commit, "--", dir).Output()
		if err != nil {
			return nil, fmt.Errorf("git ls-tree: %v", err)
		}
		for _, f := range strings.Split(string(out), "\n") {
			if f != "" && strings.HasSuffix(f, suffix) {
				files = append(files, f)
			}
		}
	} else {
		root := filepath.Join(u.dir, filepath.FromSlash(dir))
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(p, suffix) {
				rel, _ := filepath.Rel(u.dir, p)
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	sort.Strings(files)
	return files, nil
}

package rustsrc

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

// Source reads files of the Materialize source: from a git repository (a
// work tree or a bare repository) at a commit, or from a plain directory.
type Source struct {
	Dir    string // the repository or source tree
	Commit string // the full commit read; "" for a plain directory
	cache  map[string][]byte
	toks   map[string][]Token
	files  map[string]*File
	rsList []string // every .rs file under src/, lazily
}

// Open opens dir: a bare repository or a checkout (dir/.git) is read
// through git at commit (default HEAD); anything else must be a source tree
// with src/, and commit (required) only labels the output.
func Open(dir, commit string) (*Source, error) {
	u := newSource(dir, "")
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
		u.Commit = strings.TrimSpace(string(full))
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

// AtCommit reads the git repository at dir at commit, a full commit hash
// already resolved (Open resolves a revision).
func AtCommit(dir, commit string) *Source {
	return newSource(dir, commit)
}

func newSource(dir, commit string) *Source {
	return &Source{Dir: dir, Commit: commit, cache: map[string][]byte{}, toks: map[string][]Token{}, files: map[string]*File{}}
}

// Read returns a file's content; the path is relative to the repository root.
func (u *Source) Read(p string) ([]byte, error) {
	if b, ok := u.cache[p]; ok {
		return b, nil
	}
	var b []byte
	var err error
	if u.Commit != "" {
		var stderr bytes.Buffer
		cmd := exec.Command("git", "-C", u.Dir, "show", u.Commit+":"+p)
		cmd.Stderr = &stderr
		b, err = cmd.Output()
		if err != nil {
			err = fmt.Errorf("git show %s:%s: %v: %s", u.Commit, p, err, strings.TrimSpace(stderr.String()))
		}
	} else {
		b, err = os.ReadFile(filepath.Join(u.Dir, filepath.FromSlash(p)))
	}
	if err != nil {
		return nil, err
	}
	u.cache[p] = b
	return b, nil
}

// Tokens returns the tokens of the Rust file p (Lex).
func (u *Source) Tokens(p string) ([]Token, error) {
	if t, ok := u.toks[p]; ok {
		return t, nil
	}
	b, err := u.Read(p)
	if err != nil {
		return nil, err
	}
	t, err := Lex(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	u.toks[p] = t
	return t, nil
}

// File returns what ParseFile reads of the Rust file p.
func (u *Source) File(p string) (*File, error) {
	if f, ok := u.files[p]; ok {
		return f, nil
	}
	toks, err := u.Tokens(p)
	if err != nil {
		return nil, err
	}
	f, err := ParseFile(toks, p)
	if err != nil {
		return nil, err
	}
	u.files[p] = f
	return f, nil
}

// Exists reports whether the file or directory p exists.
func (u *Source) Exists(p string) bool {
	if u.Commit != "" {
		return exec.Command("git", "-C", u.Dir, "cat-file", "-e", u.Commit+":"+p).Run() == nil
	}
	_, err := os.Stat(filepath.Join(u.Dir, filepath.FromSlash(p)))
	return err == nil
}

// RustFiles lists the .rs files under src/.
func (u *Source) RustFiles() ([]string, error) {
	if u.rsList == nil {
		files, err := u.FilesUnder("src", ".rs")
		if err != nil {
			return nil, err
		}
		u.rsList = files
	}
	return u.rsList, nil
}

// FilesContaining lists the .rs files under src/ that contain word (with
// git, as a whole word).
func (u *Source) FilesContaining(word string) ([]string, error) {
	if u.Commit != "" {
		out, err := exec.Command("git", "-C", u.Dir, "grep", "-l", "-w", "-F", "-e", word, u.Commit, "--", "src/*.rs").Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
				return nil, nil // no match
			}
			return nil, fmt.Errorf("git grep %s: %v", word, err)
		}
		var files []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l != "" {
				files = append(files, strings.TrimPrefix(l, u.Commit+":"))
			}
		}
		return files, nil
	}
	all, err := u.RustFiles()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range all {
		b, err := u.Read(f)
		if err != nil {
			return nil, err
		}
		if bytes.Contains(b, []byte(word)) {
			files = append(files, f)
		}
	}
	return files, nil
}

// CrateDir returns the directory of the Cargo package containing file.
func (u *Source) CrateDir(file string) (string, error) {
	for d := path.Dir(file); d != "." && d != "/"; d = path.Dir(d) {
		if u.Exists(d + "/Cargo.toml") {
			return d, nil
		}
	}
	return "", fmt.Errorf("no Cargo.toml above %s", file)
}

// FilesUnder lists the files under dir (relative to the repository root)
// whose names end in suffix, sorted; in a plain directory, build output
// (target/) and hidden directories are left out.
func (u *Source) FilesUnder(dir, suffix string) ([]string, error) {
	var files []string
	if u.Commit != "" {
		out, err := exec.Command("git", "-C", u.Dir, "ls-tree", "-r", "--name-only", u.Commit, "--", dir).Output()
		if err != nil {
			return nil, fmt.Errorf("git ls-tree: %v", err)
		}
		for _, f := range strings.Split(string(out), "\n") {
			if f != "" && strings.HasSuffix(f, suffix) {
				files = append(files, f)
			}
		}
	} else {
		root := filepath.Join(u.Dir, filepath.FromSlash(dir))
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != root && (d.Name() == "target" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, suffix) {
				rel, _ := filepath.Rel(u.Dir, p)
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

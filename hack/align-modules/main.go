// Command align-modules keeps the modules that `make run` and `make test`
// build on one version of every module they share.
//
//	go run ./hack/align-modules -check   # list the versions that differ; exit 1 if any
//	go run ./hack/align-modules          # require each shared module at the highest version any needs
//
// Go compiles a package once per version of it and of everything it
// imports, and keeps the result in its build cache. The local cluster builds
// the operator and the programs pinned in hack/tools (Kubernetes, etcd,
// containerd, CoreDNS, Helm, kube-network-policies, metrics-server), which
// share client-go, the Kubernetes API types, gRPC, OpenTelemetry and more:
// on one version each, a package is compiled once for all of them instead
// of once per program. Only raising is ever done, to a version another of
// these modules already builds with; a version a module pins by a replace
// directive (the Kubernetes libraries of hack/tools/kube, which must match
// its Kubernetes release) is never raised: -check names it, to be bumped by
// hand. Left out: cert-manager and the oldest kube-apiserver, pinned to old
// releases on purpose; and actionlint and promtool, which share little.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/semver"
)

// Modules are the directories of the modules `make run` and `make test`
// build, relative to the repository's root: the main module and the
// hack/tools modules of the programs the local cluster and the tests run.
var Modules = []string{
	".",
	"hack/tools/kube",
	"hack/tools/containerd",
	"hack/tools/helm",
	"hack/tools/helm4",
	"hack/tools/coredns",
	"hack/tools/kube-network-policies",
	"hack/tools/metrics-server",
}

// Dependents are modules that replace the main module by its directory:
// they are tidied after the main module's versions move.
var Dependents = []string{"hack/bench/webhook"}

// maxRounds bounds the raise-and-tidy loop: a raise can pull in newer
// versions of other modules, which the next round aligns.
const maxRounds = 5

func main() {
	check := flag.Bool("check", false, "list the shared modules whose versions differ and exit 1 if any; change nothing")
	flag.Parse()
	if err := run(*check, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "align-modules:", err)
		os.Exit(1)
	}
}

func run(check bool, out io.Writer) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	for round := 1; ; round++ {
		lists := map[string]BuildList{}
		for _, dir := range Modules {
			list, err := listModules(dir)
			if err != nil {
				return err
			}
			lists[dir] = list
		}
		raises := Plan(lists)
		if len(raises) == 0 {
			if round == 1 {
				return nil
			}
			return tidy(Dependents, out)
		}
		if check {
			for _, r := range raises {
				pinned := ""
				if r.Replace {
					pinned = " (pinned by a replace: bump it by hand)"
				}
				fmt.Fprintf(out, "%s: %s %s, others need %s%s\n", r.Dir, r.Path, r.From, r.To, pinned)
			}
			return fmt.Errorf("%d module versions differ between the modules make run and make test build: run 'go run ./hack/align-modules'", len(raises))
		}
		if round > maxRounds {
			return fmt.Errorf("still %d module versions to raise after %d rounds", len(raises), maxRounds)
		}
		for _, r := range raises {
			if r.Replace {
				return fmt.Errorf("%s pins %s at %s by a replace directive and others need %s: bump it by hand, with the release it belongs to", r.Dir, r.Path, r.From, r.To)
			}
		}
		for _, dir := range Modules {
			if err := apply(dir, raises, out); err != nil {
				return err
			}
		}
	}
}

// A BuildList is a module's selected versions by module path; Replaced
// says which paths a replace directive pins (never raised).
type BuildList struct {
	Versions map[string]string
	Replaced map[string]bool
}

// A Raise asks the module in Dir to select Path at To instead of From.
type Raise struct {
	Dir, Path, From, To string
	Replace             bool
}

// Plan returns, for every module path that two or more modules select at
// different versions, the raises to the highest of them, sorted.
func Plan(lists map[string]BuildList) []Raise {
	highest := map[string]string{}
	for _, list := range lists {
		for path, v := range list.Versions {
			if h, ok := highest[path]; !ok || semver.Compare(v, h) > 0 {
				highest[path] = v
			}
		}
	}
	var raises []Raise
	for dir, list := range lists {
		for path, v := range list.Versions {
			if h := highest[path]; semver.Compare(v, h) < 0 {
				raises = append(raises, Raise{Dir: dir, Path: path, From: v, To: h, Replace: list.Replaced[path]})
			}
		}
	}
	sort.Slice(raises, func(i, j int) bool {
		if raises[i].Dir != raises[j].Dir {
			return raises[i].Dir < raises[j].Dir
		}
		return raises[i].Path < raises[j].Path
	})
	return raises
}

type listedModule struct {
	Path    string
	Version string
	Main    bool
	Replace *struct {
		Path    string
		Version string
	}
}

// listModules reads the selected versions of the modules that dir's
// go.mod requires: tidied, those are the modules that provide a package to
// its build. (The rest of the module graph is never compiled, and tidy
// would drop a raise of it.) Modules replaced by a directory or by another
// module are left out.
func listModules(dir string) (BuildList, error) {
	raw, err := goOutput(dir, "mod", "edit", "-json")
	if err != nil {
		return BuildList{}, err
	}
	var goMod struct{ Require []struct{ Path string } }
	if err := json.Unmarshal(raw, &goMod); err != nil {
		return BuildList{}, fmt.Errorf("go mod edit -json in %s: %w", dir, err)
	}
	required := map[string]bool{}
	for _, r := range goMod.Require {
		required[r.Path] = true
	}
	if raw, err = goOutput(dir, "list", "-m", "-json", "all"); err != nil {
		return BuildList{}, err
	}
	list := BuildList{Versions: map[string]string{}, Replaced: map[string]bool{}}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		var m listedModule
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return BuildList{}, fmt.Errorf("go list -m all in %s: %w", dir, err)
		}
		v := m.Version
		if m.Replace != nil {
			if m.Replace.Version == "" || m.Replace.Path != m.Path {
				continue
			}
			v = m.Replace.Version
			list.Replaced[m.Path] = true
		}
		if m.Main || v == "" || !required[m.Path] {
			continue
		}
		list.Versions[m.Path] = v
	}
	return list, nil
}

// repoRoot is the main module's directory, where Modules are.
func repoRoot() (string, error) {
	out, err := goOutput("", "env", "GOMOD")
	if err != nil {
		return "", err
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not in a Go module: run it from the repository")
	}
	return filepath.Dir(gomod), nil
}

// goCommand runs go in dir, outside any go.work, which would change what
// each module selects.
func goCommand(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	return cmd
}

func goOutput(dir string, args ...string) ([]byte, error) {
	cmd := goCommand(dir, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s in %s: %v: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// apply edits dir's go.mod for its raises, then tidies it.
func apply(dir string, raises []Raise, out io.Writer) error {
	args := []string{"mod", "edit"}
	for _, r := range raises {
		if r.Dir != dir {
			continue
		}
		fmt.Fprintf(out, "%s: %s %s => %s\n", filepath.ToSlash(dir), r.Path, r.From, r.To)
		args = append(args, "-require="+r.Path+"@"+r.To)
	}
	if len(args) == 2 {
		return nil
	}
	if err := runGo(dir, out, args...); err != nil {
		return err
	}
	return tidy([]string{dir}, out)
}

func tidy(dirs []string, out io.Writer) error {
	for _, dir := range dirs {
		if err := runGo(dir, out, "mod", "tidy"); err != nil {
			return err
		}
	}
	return nil
}

func runGo(dir string, out io.Writer, args ...string) error {
	cmd := goCommand(dir, args...)
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s in %s: %w", strings.Join(args[:2], " "), dir, err)
	}
	return nil
}

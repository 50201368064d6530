package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
	"github.com/materializeinc/orchestratord/hack/internal/rustsrc/rustsrctest"
)

// testRepo is a git repository whose commits are made from file trees.
type testRepo struct {
	t   *testing.T
	dir string
}

func newTestRepo(t *testing.T) *testRepo {
	r := &testRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *testRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir, "-c", "user.name=test", "-c", "user.email=test@example.com",
		"-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit replaces the work tree by files and commits it; it returns the
// commit's hash.
func (r *testRepo) commit(files map[string]string, msg string) string {
	r.t.Helper()
	entries, _ := os.ReadDir(r.dir)
	for _, e := range entries {
		if e.Name() != ".git" {
			os.RemoveAll(filepath.Join(r.dir, e.Name()))
		}
	}
	rustsrctest.Write(r.t, r.dir, files)
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// versioned is the test tree of a workspace at version v.
func versioned(t *testing.T, main, v string) map[string]string {
	files := testTree(t, main)
	files[versionFile] = "[package]\nname = \"mz-environmentd\"\nversion = \"" + v + "\"\n"
	return files
}

// withProgram runs f with the test tree's program as the only one.
func withProgram(t *testing.T) {
	saved := programs
	programs = []program{{name: "prog", goVar: "Prog", out: "prog_args.go", main: "src/prog/src/main.rs", strct: "Args"}}
	t.Cleanup(func() { programs = saved })
}

const (
	addedFlag    = "    #[clap(long)]\n    added: bool,\n}"
	limitRange   = "range(1..=10)"
	limitRange26 = "range(1..=20)"
	maybeBool    = "    #[clap(long)]\n    maybe_bool: Option<bool>,\n"
)

// historyRepo is upstream's release flow in miniature: main moves from
// 26.1 to 26.2 to 26.3 ("release: bump to version ..."), a release branch
// tags 26.2 (rc.1, then the release), and each line changes the command
// line: --added appears in 26.2, --maybe-bool goes away and --limit's range
// changes in 26.3. bad26_1 makes 26.1's sources unreadable by the generator.
func historyRepo(t *testing.T, bad26_1 bool) (r *testRepo, cut26_1, tag26_2, head string) {
	r = newTestRepo(t)
	main26_1 := testMain
	if bad26_1 {
		main26_1 = strings.Replace(testMain, "#[clap(long)]\n    maybe_bool", "#[clap(long, frobnicate = 3)]\n    maybe_bool", 1)
	}
	cut26_1 = r.commit(versioned(t, main26_1, "26.1.0-dev.0"), "environmentd: 26.1's command line")
	r.commit(versioned(t, main26_1, "26.2.0-dev.0"), "release: bump to version v26.2.0-dev.0")
	main26_2 := strings.Replace(testMain, "    not_ipnet: Option<IpNet>,\n}", "    not_ipnet: Option<IpNet>,\n"+addedFlag, 1)
	cut26_2 := r.commit(versioned(t, main26_2, "26.2.0-dev.0"), "environmentd: --added")
	// The release branch, cut here.
	r.git("checkout", "-q", "-b", "release-26.2")
	tag26_2 = r.commit(versioned(t, main26_2, "26.2.0-rc.1"), "release: bump to version v26.2.0-rc.1")
	r.git("tag", "-a", "-m", "v26.2.0-rc.1", "v26.2.0-rc.1")
	r.commit(versioned(t, main26_2, "26.2.0"), "release: bump to version v26.2.0")
	r.git("tag", "-a", "-m", "v26.2.0", "v26.2.0")
	r.git("checkout", "-q", "main")
	if got := r.git("rev-parse", "HEAD"); got != cut26_2 {
		t.Fatalf("main is at %s, want %s", got, cut26_2)
	}
	r.commit(versioned(t, main26_2, "26.3.0-dev.0"), "release: bump to version v26.3.0-dev.0")
	main26_3 := strings.Replace(strings.Replace(main26_2, maybeBool, "", 1), limitRange, limitRange26, 1)
	head = r.commit(versioned(t, main26_3, "26.3.0-dev.0"), "environmentd: no --maybe-bool; --limit up to 20")
	// Old tags of another series are not release lines of 26.
	r.git("tag", "v0.9.1", cut26_1)
	return r, cut26_1, tag26_2, head
}

func TestReleasePoints(t *testing.T) {
	r, cut26_1, tag26_2, head := historyRepo(t, false)
	points, missing, err := releasePoints(r.dir, head, minorVersion{26, 0}, minorVersion{26, 3})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range points {
		got = append(got, p.version.String()+" "+p.commit+" "+strings.Fields(p.from)[0]+" "+strings.Fields(p.from)[1])
	}
	want := []string{
		"26.1 " + cut26_1 + " " + cut26_1[:10] + " (26.1.0-dev.0),",
		"26.2 " + tag26_2 + " tag v26.2.0-rc.1", // the first tag of the line
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("points:\n got %q\nwant %q", got, want)
	}
	if !reflect.DeepEqual(missing, []minorVersion{{26, 0}}) {
		t.Errorf("missing = %v, want [26.0]", missing)
	}
	// -since bounds the lines from below, the generated commit's from above.
	points, missing, err = releasePoints(r.dir, head, minorVersion{26, 2}, minorVersion{26, 2})
	if err != nil || len(points) != 0 || len(missing) != 0 {
		t.Errorf("26.2 to 26.2: %v %v %v", points, missing, err)
	}
}

func TestSemverLess(t *testing.T) {
	order := []string{"v26.2.0-dev.0", "v26.2.0-rc.1", "v26.2.0-rc.2", "v26.2.0-rc.10", "v26.2.0", "v26.2.1", "v26.10.0"}
	for i := 0; i+1 < len(order); i++ {
		a, b := tagPattern.FindStringSubmatch(order[i]), tagPattern.FindStringSubmatch(order[i+1])
		if !semverLess(a, b) || semverLess(b, a) {
			t.Errorf("%s < %s does not hold", order[i], order[i+1])
		}
	}
}

// The generated table holds every line's command line: Since and Until on
// what was added, removed or changed, the newest definition last.
func TestGenerateHistory(t *testing.T) {
	withProgram(t)
	r, _, _, _ := historyRepo(t, false)
	out := t.TempDir()
	if err := run(r.dir, "", "example.com/materialize", out, "26.1", featureFlags{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "prog_args.go"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for _, want := range []string{
		`Versions:         []string{"26.1", "26.2", "26.3"},`,
		"//   - 26.2: tag v26.2.0-rc.1\n",
		"(26.3.0-dev.0), the generated commit\n",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("the table lacks %q:\n%s", want, src)
		}
	}
	// Each entry's Since and Until, in order.
	var got []string
	for _, entry := range strings.Split(src, "\t\t{\n")[1:] {
		id := entryField(entry, "ID")
		if s, u := entryField(entry, "Since"), entryField(entry, "Until"); s != "" || u != "" {
			id += " " + s + ".." + u
		}
		got = append(got, id)
	}
	want := []string{"path_arg", "mode", "list", "limit ..26.2", "limit 26.3..", "pair", "speed", "explicit_bool",
		"maybe_bool ..26.2", "inner_thing", "feature_on", "timeout", "listen", "ip", "label", "not_ipnet", "added 26.2.."}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries:\n got %q\nwant %q", got, want)
	}
	if !strings.Contains(src, `Int: &IntRange{Unsigned: false, Bounded: true, Min: "1", Max: "10"}`) ||
		!strings.Contains(src, `Int: &IntRange{Unsigned: false, Bounded: true, Min: "1", Max: "20"}`) {
		t.Errorf("both ranges of --limit should be in the table")
	}

	// Without -since the table is the commit's alone.
	if err := run(r.dir, "", "example.com/materialize", out, "", featureFlags{}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(out, "prog_args.go"))
	if s := string(b); strings.Contains(s, "Versions:") || strings.Contains(s, "Since:") || strings.Contains(s, "Until:") ||
		strings.Contains(s, `ID:       "maybe_bool"`) {
		t.Errorf("-since= still reads the history:\n%s", s)
	}
	// A source tree has no history.
	if err := run(rustsrctest.Tree(t, versioned(t, testMain, "26.3.0")), "x", "example.com/materialize", out, "26.1", featureFlags{}); err == nil ||
		!strings.Contains(err.Error(), "-since needs a git repository") {
		t.Errorf("a source tree with -since: %v", err)
	}
}

// A release whose sources the generator cannot read is reported and left
// out: its versions get the nearest line's command line.
func TestGenerateHistorySkipsWhatItCannotRead(t *testing.T) {
	withProgram(t)
	r, cut26_1, _, head := historyRepo(t, true)
	up, err := rustsrc.Open(r.dir, head)
	if err != nil {
		t.Fatal(err)
	}
	lines, notes, err := history(up, "26.1", featureFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if got := versionsOf(lines); !reflect.DeepEqual(got, []minorVersion{{26, 2}, {26, 3}}) {
		t.Errorf("lines = %v, want 26.2 and 26.3", got)
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "26.1: "+cut26_1[:10]) || !strings.Contains(notes[0], "does not generate") ||
		!strings.Contains(notes[0], "attribute frobnicate is not handled") {
		t.Errorf("notes = %q", notes)
	}
	// The newest commit is checked in full: it must generate.
	if _, err := tables(up, featureFlags{}, false); err != nil {
		t.Fatal(err)
	}
}

// merge: runs of equal definitions, what went away, what came back, and
// subcommands that appear.
func TestMerge(t *testing.T) {
	arg := func(id string, def ...string) *Arg {
		return &Arg{ID: id, Long: id, Action: Set, Default: def, Origin: "somewhere " + id + strings.Join(def, "")}
	}
	v := []string{"26.1", "26.2", "26.3", "26.4"}
	tables := []*Command{
		{Name: "p", Args: []*Arg{arg("a"), arg("gone"), arg("back")}},
		{Name: "p", Args: []*Arg{arg("a", "1"), arg("gone")}},
		{Name: "p", Args: []*Arg{arg("new"), arg("a", "1"), arg("back")}, Subcommands: []*Command{{Name: "s", Args: []*Arg{arg("x")}}}},
		{Name: "p", Args: []*Arg{arg("new"), arg("a", "1"), arg("back")}, Subcommands: []*Command{{Name: "s", Args: []*Arg{arg("x"), arg("y")}}}},
	}
	cmd, err := merge(tables, v)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range cmd.Args {
		got = append(got, a.ID+strings.Join(a.Default, "")+" "+a.Since+".."+a.Until)
	}
	want := []string{"new 26.3..", "a ..26.1", "a1 26.2..", "gone ..26.2", "back ..26.1", "back 26.3.."}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("args:\n got %q\nwant %q", got, want)
	}
	if !reflect.DeepEqual(cmd.Versions, v) || len(cmd.Subcommands) != 1 || cmd.Subcommands[0].Since != "26.3" ||
		cmd.Subcommands[0].Args[1].Since != "26.4" || cmd.Subcommands[0].Args[0].Since != "26.3" {
		t.Errorf("merged: %+v, subcommands %+v", cmd, cmd.Subcommands)
	}
	// A definition's Origin is its newest one's; Origin alone is no change.
	tables[1].Args[0].Origin = "elsewhere"
	if cmd, _ := merge(tables, v); cmd.Args[2].Origin != "somewhere a1" {
		t.Errorf("origin = %q", cmd.Args[2].Origin)
	}
	// Settings of the command that change cannot be expressed.
	tables[0].Version = true
	if _, err := merge(tables, v); err == nil || !strings.Contains(err.Error(), "settings at 26.1 differ") {
		t.Errorf("a changed command setting: %v", err)
	}
}

// entryField returns the value of "Name: value," in a generated entry's first
// level, unquoted.
func entryField(entry, name string) string {
	for _, line := range strings.Split(entry, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && k == name {
			return strings.Trim(strings.TrimSuffix(strings.TrimSpace(v), ","), `"`)
		}
		if line == "}," {
			break
		}
	}
	return ""
}

// Command gen-standin-args reads Materialize's Rust sources and writes the
// command-line tables of environmentd and balancerd for the test stand-ins
// (package test/standin/clap), following clap v4's derive rules and
// mz_ore::cli::parse_args.
//
//	go run ./hack/gen-standin-args -upstream DIR [-commit SHA] [-upstream-name NAME] [-since 26.1]
//
// DIR is a Materialize checkout or bare repository (read with git at -commit,
// default HEAD) or an extracted source tree (then -commit is required and
// only labels the output). -upstream-name is what the generated header calls
// the repository.
//
// With git, the tables also hold the older release lines from -since (the
// oldest environmentd the operator runs) up to the commit's own line: each
// line is read at its first tag or, without one, where upstream's release
// tooling cut it from main (history.go), and every argument says which lines
// have it (merge.go). A line whose sources the generator cannot read is
// reported and left out (its versions get the older line's command line).
// Only the commit itself is checked against the value parser models. -since=
// generates the commit's command line alone (required for a source tree).
//
// Anything the generator does not understand fails the run with the struct
// and field named; -feature CRATE_DIR:FEATURE=on|off decides
// a #[cfg(feature)] it cannot decide from the Cargo manifests. A value
// parser package clap models gets its own parser kind (valueparsers.go),
// after checking that upstream's parser code and the crate versions in
// Cargo.lock are still the ones modelled; any other stays Unchecked.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
)

// programs are the command lines generated.
var programs = []program{
	{
		name:  "environmentd",
		goVar: "Environmentd",
		out:   "environmentd_args.go",
		main:  "src/environmentd/src/environmentd/main.rs",
		strct: "Args",
	},
	{
		name:  "balancerd",
		goVar: "Balancerd",
		out:   "balancerd_args.go",
		main:  "src/balancerd/src/bin/balancerd.rs",
		strct: "Args",
	},
	{
		name:  "clusterd",
		goVar: "Clusterd",
		out:   "clusterd_args.go",
		main:  "src/clusterd/src/lib.rs",
		strct: "Args",
	},
}

// cliFile is mz_ore's parse_args, whose behaviour the tables encode.
const cliFile = "src/ore/src/cli.rs"

type featureFlags map[string]bool

func (f featureFlags) String() string { return fmt.Sprint(map[string]bool(f)) }

func (f featureFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || (v != "on" && v != "off") || !strings.Contains(k, ":") {
		return fmt.Errorf("want CRATE_DIR:FEATURE=on|off, got %q", s)
	}
	f[k] = v == "on"
	return nil
}

func main() {
	upstreamDir := flag.String("upstream", "", "Materialize checkout, bare repository or source tree (required)")
	commit := flag.String("commit", "", "commit to read (git) or to name in the header (source tree)")
	name := flag.String("upstream-name", "github.com/MaterializeInc/materialize", "repository named in the generated header")
	out := flag.String("out", "test/standin/clap", "output directory")
	since := flag.String("since", "26.1", "oldest release line (MAJOR.MINOR) whose arguments the tables hold; empty for the commit's alone")
	features := featureFlags{}
	flag.Var(features, "feature", "CRATE_DIR:FEATURE=on|off, decides a #[cfg(feature)] (repeatable)")
	flag.Parse()
	if *upstreamDir == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*upstreamDir, *commit, *name, *out, *since, features); err != nil {
		fmt.Fprintln(os.Stderr, "gen-standin-args:", err)
		os.Exit(1)
	}
}

// generated is one program's table at one commit.
type generated struct {
	p       program
	cmd     *Command
	sources []string
}

// tables generates every program's table from up. history reads an older
// release: see gen.history.
func tables(up *rustsrc.Source, features featureFlags, history bool) ([]generated, error) {
	if err := checkParseArgs(up); err != nil {
		return nil, err
	}
	g0 := &gen{up: up, features: features, history: history}
	if err := g0.indexValueEnums(); err != nil {
		return nil, err
	}
	var out []generated
	for _, p := range programs {
		g := &gen{up: up, features: features, enums: g0.enums, manual: g0.manual, history: history}
		cmd, err := g.program(&p)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", p.name, err)
		}
		out = append(out, generated{p: p, cmd: cmd, sources: g.sources})
	}
	return out, nil
}

func run(dir, commit, name, out, since string, features featureFlags) error {
	up, err := rustsrc.Open(dir, commit)
	if err != nil {
		return err
	}
	if up.Commit != "" {
		commit = up.Commit
	}
	newest, err := tables(up, features, false)
	if err != nil {
		return err
	}
	var lines []release
	var notes []string
	if since != "" {
		if lines, notes, err = history(up, since, features); err != nil {
			return err
		}
	}
	var versions []string
	for _, r := range lines {
		versions = append(versions, r.version.String())
	}
	for i, gp := range newest {
		var cmds []*Command
		for _, r := range lines {
			cmds = append(cmds, r.cmds[gp.p.name])
		}
		cmd := gp.cmd
		if len(lines) > 0 {
			cmds[len(cmds)-1] = gp.cmd // the checked table, not the history one
			if cmd, err = merge(cmds, versions); err != nil {
				return fmt.Errorf("%s: %v", gp.p.name, err)
			}
		}
		src, err := emit(gp.p, cmd, name, commit, gp.sources, lines, notes)
		if err != nil {
			return fmt.Errorf("%s: %v", gp.p.name, err)
		}
		if err := os.WriteFile(filepath.Join(out, newest[i].p.out), src, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// history reads the release lines from since up to up's commit, which is
// the last of them; notes say which lines have no table of their own.
func history(up *rustsrc.Source, since string, features featureFlags) ([]release, []string, error) {
	if up.Commit == "" {
		return nil, nil, fmt.Errorf("-since needs a git repository to read older releases from; pass -since= for a source tree")
	}
	from, err := parseMinor(since)
	if err != nil {
		return nil, nil, fmt.Errorf("-since: %v", err)
	}
	headVersion, err := packageVersion(up)
	if err != nil {
		return nil, nil, err
	}
	head, err := parseMinor(headVersion)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", versionFile, err)
	}
	if head.less(from) {
		return nil, nil, fmt.Errorf("-since %s is newer than the commit's version %s", since, headVersion)
	}
	points, missing, err := releasePoints(up.Dir, up.Commit, from, head)
	if err != nil {
		return nil, nil, err
	}
	var notes []string
	for _, v := range missing {
		notes = append(notes, fmt.Sprintf("%s: neither a tag nor a cut found in the history", v))
	}
	var lines []release
	for _, r := range points {
		rup, err := rustsrc.Open(up.Dir, r.commit)
		if err != nil {
			return nil, nil, err
		}
		warnOut = io.Discard
		gs, err := tables(rup, features, true)
		warnOut = os.Stderr
		if err != nil {
			warnf("release %s at %s: %v", r.version, r.from, err)
			notes = append(notes, fmt.Sprintf("%s: %s does not generate (%v)", r.version, r.from, err))
			continue
		}
		r.cmds = map[string]*Command{}
		for _, g := range gs {
			r.cmds[g.p.name] = g.cmd
		}
		lines = append(lines, r)
	}
	lines = append(lines, release{version: head, commit: up.Commit,
		from: fmt.Sprintf("%s (%s), the generated commit", up.Commit[:10], headVersion)})
	return lines, notes, nil
}

// checkParseArgs verifies that mz_ore::cli::parse_args still does what the
// tables assume: it prefixes the env of the top-level command's arguments
// and sets args_override_self(true).
func checkParseArgs(up *rustsrc.Source) error {
	b, err := up.Read(cliFile)
	if err != nil {
		return err
	}
	src := strings.Join(strings.Fields(string(b)), " ")
	for _, want := range []string{
		"let command = O::command(); let arg_envs: Vec<_> = command .get_arguments()",
		"let mut prefixed_env = OsString::from(prefix); prefixed_env.push(env);",
		"let mut clap = O::command().args_override_self(true);",
		"clap = clap.disable_version_flag(true);",
		"clap = clap.mut_arg(*arg, |arg| arg.env_os(env));",
	} {
		if !strings.Contains(src, want) {
			return fmt.Errorf("%s no longer contains %q: review how mz_ore::cli::parse_args builds the command and update the generator", cliFile, want)
		}
	}
	return nil
}

// program builds one program's table.
func (g *gen) program(p *program) (*Command, error) {
	var err error
	if g.binCrate, err = g.up.CrateDir(p.main); err != nil {
		return nil, err
	}
	toks, err := g.up.Tokens(p.main)
	if err != nil {
		return nil, err
	}
	if err := p.readCliConfig(toks); err != nil {
		return nil, fmt.Errorf("%s: %v", p.main, err)
	}
	prefix := "no env prefix"
	if p.envPrefix != "" {
		prefix = fmt.Sprintf("env prefix %q", p.envPrefix)
	}
	g.used(cliFile, "mz_ore::cli::parse_args: "+prefix+", args_override_self")
	g.used(p.main, "cli::parse_args call")
	items, err := g.items(p.main, p.strct)
	if err != nil {
		return nil, err
	}
	if len(items) != 1 || items[0].Kind != "struct" {
		return nil, fmt.Errorf("%s: want one struct %s, found %d items", p.main, p.strct, len(items))
	}
	cmd, err := g.command(items[0], p.name, p.envPrefix, true)
	if err != nil {
		return nil, err
	}
	// parse_args disables the version flag unless enable_version_flag, and
	// sets args_override_self(true) (a global setting).
	cmd.Version = cmd.Version && p.version
	var global func(c *Command)
	global = func(c *Command) {
		c.ArgsOverrideSelf = true
		for _, sc := range c.Subcommands {
			global(sc)
		}
	}
	global(cmd)
	if err := check(cmd); err != nil {
		return nil, err
	}
	return cmd, nil
}

// readCliConfig reads the one cli::parse_args(CliConfig ...) call.
func (p *program) readCliConfig(toks []rustsrc.Token) error {
	calls := 0
	for i := 0; i+1 < len(toks); i++ {
		if !toks[i].Is(rustsrc.Ident, "parse_args") || !toks[i+1].IsPunct("(") {
			continue
		}
		if i > 0 && toks[i-1].Is(rustsrc.Ident, "fn") {
			continue
		}
		calls++
		end, err := rustsrc.Matching(toks, i+1)
		if err != nil {
			return err
		}
		arg := toks[i+2 : end]
		switch {
		case rustsrc.Render(arg) == "CliConfig::default()":
		case len(arg) > 2 && arg[0].Is(rustsrc.Ident, "CliConfig") && arg[1].IsPunct("{"):
			close, err := rustsrc.Matching(arg, 1)
			if err != nil || close != len(arg)-1 {
				return fmt.Errorf("cannot read %s", rustsrc.Render(arg))
			}
			for _, f := range rustsrc.SplitTop(arg[2:close]) {
				s := strings.ReplaceAll(rustsrc.Render(f), " ", "")
				switch {
				case s == "":
				case s == "env_prefix:None":
					p.envPrefix = ""
				case len(f) == 6 && f[0].Is(rustsrc.Ident, "env_prefix") && f[2].Is(rustsrc.Ident, "Some") && f[4].Kind == rustsrc.Str:
					p.envPrefix = f[4].Text
				case s == "enable_version_flag:true":
					p.version = true
				case s == "enable_version_flag:false":
					p.version = false
				case s == "..Default::default()" || s == "..CliConfig::default()":
				default:
					return fmt.Errorf("cannot read CliConfig field %q", s)
				}
			}
		default:
			return fmt.Errorf("cannot read parse_args argument %s", rustsrc.Render(arg))
		}
	}
	if calls != 1 {
		return fmt.Errorf("want one cli::parse_args call, found %d", calls)
	}
	return nil
}

// check applies clap's debug assertions that matter here: unique ids and
// names, and references to existing arguments.
func check(cmd *Command) error {
	ids := map[string]bool{}
	names := map[string]string{}
	for _, a := range cmd.Args {
		if ids[a.ID] {
			return fmt.Errorf("%s: argument id %q is used twice", cmd.Name, a.ID)
		}
		ids[a.ID] = true
		for _, n := range append([]string{a.Long}, a.Aliases...) {
			if n == "" {
				continue
			}
			if other, ok := names[n]; ok {
				return fmt.Errorf("%s: --%s is used by %s and %s", cmd.Name, n, other, a.ID)
			}
			names[n] = a.ID
		}
		if a.Long == "help" || a.Short == 'h' || (cmd.Version && (a.Long == "version" || a.Short == 'V')) {
			return fmt.Errorf("%s: %s collides with clap's help/version flags", cmd.Name, a.ID)
		}
	}
	for _, a := range cmd.Args {
		refs := append(append(append([]string{}, a.Requires...), a.RequiredUnlessPresent...), a.RequiredUnlessPresentAll...)
		for _, c := range append(append([]Cond{}, a.RequiredIfEq...), a.RequiredIfEqAll...) {
			refs = append(refs, c.Arg)
		}
		for _, r := range refs {
			if !ids[r] {
				return fmt.Errorf("%s: %s refers to unknown argument %q", cmd.Name, a.Origin, r)
			}
		}
		for _, r := range a.ConflictsWith {
			if !ids[r] {
				return fmt.Errorf("%s: %s conflicts with unknown argument %q", cmd.Name, a.Origin, r)
			}
		}
		for _, d := range a.DefaultIf {
			if !ids[d.Arg] {
				// clap does not assert these; the condition never holds.
				warnf("%s: %s: default_value_if on unknown argument %q never applies", cmd.Name, a.Origin, d.Arg)
			}
		}
	}
	for _, sc := range cmd.Subcommands {
		if err := check(sc); err != nil {
			return err
		}
	}
	return nil
}

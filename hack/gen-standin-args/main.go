// Command gen-standin-args reads Materialize's Rust sources and writes the
// command-line tables of environmentd and balancerd for the test stand-ins
// (package test/standin/clap), following clap v4's derive rules and
// mz_ore::cli::parse_args.
//
//	go run ./hack/gen-standin-args -upstream DIR [-commit SHA] [-upstream-name NAME]
//
// DIR is a Materialize checkout or bare repository (read with git at -commit,
// default HEAD) or an extracted source tree (then -commit is required and
// only labels the output). -upstream-name is what the generated header calls
// the repository. Anything the generator does not understand fails the run
// with the struct and field named; -feature CRATE_DIR:FEATURE=on|off decides
// a #[cfg(feature)] it cannot decide from the Cargo manifests. A value
// parser package clap models gets its own parser kind (valueparsers.go),
// after checking that upstream's parser code and the crate versions in
// Cargo.lock are still the ones modelled; any other stays Unchecked.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	features := featureFlags{}
	flag.Var(features, "feature", "CRATE_DIR:FEATURE=on|off, decides a #[cfg(feature)] (repeatable)")
	flag.Parse()
	if *upstreamDir == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*upstreamDir, *commit, *name, *out, features); err != nil {
		fmt.Fprintln(os.Stderr, "gen-standin-args:", err)
		os.Exit(1)
	}
}

func run(dir, commit, name, out string, features featureFlags) error {
	up, err := openUpstream(dir, commit)
	if err != nil {
		return err
	}
	if up.commit != "" {
		commit = up.commit
	}
	if err := checkParseArgs(up); err != nil {
		return err
	}
	g0 := &gen{up: up, features: features, toks: map[string][]token{}}
	if err := g0.indexValueEnums(); err != nil {
		return err
	}
	for _, p := range programs {
		g := &gen{up: up, features: features, toks: g0.toks, enums: g0.enums, manual: g0.manual}
		cmd, err := g.program(&p)
		if err != nil {
			return fmt.Errorf("%s: %v", p.name, err)
		}
		src, err := emit(p, cmd, name, commit, g.sources)
		if err != nil {
			return fmt.Errorf("%s: %v", p.name, err)
		}
		if err := os.WriteFile(filepath.Join(out, p.out), src, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// checkParseArgs verifies that mz_ore::cli::parse_args still does what the
// tables assume: it prefixes the env of the top-level command's arguments
// and sets args_override_self(true).
func checkParseArgs(up *upstream) error {
	b, err := up.read(cliFile)
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
	if g.binCrate, err = g.up.crateDir(p.main); err != nil {
		return nil, err
	}
	toks, err := g.tokens(p.main)
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
	items, err := findItems(toks, p.main, p.strct)
	if err != nil {
		return nil, err
	}
	if len(items) != 1 || items[0].kind != "struct" {
		return nil, fmt.Errorf("%s: want one struct %s, found %d items", p.main, p.strct, len(items))
	}
	cmd, err := g.command(&items[0], p.name, p.envPrefix, true)
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
func (p *program) readCliConfig(toks []token) error {
	calls := 0
	for i := 0; i+1 < len(toks); i++ {
		if !toks[i].is(tIdent, "parse_args") || !toks[i+1].punct("(") {
			continue
		}
		if i > 0 && toks[i-1].is(tIdent, "fn") {
			continue
		}
		calls++
		end, err := matching(toks, i+1)
		if err != nil {
			return err
		}
		arg := toks[i+2 : end]
		switch {
		case render(arg) == "CliConfig::default()":
		case len(arg) > 2 && arg[0].is(tIdent, "CliConfig") && arg[1].punct("{"):
			close, err := matching(arg, 1)
			if err != nil || close != len(arg)-1 {
				return fmt.Errorf("cannot read %s", render(arg))
			}
			for _, f := range splitTop(arg[2:close]) {
				s := strings.ReplaceAll(render(f), " ", "")
				switch {
				case s == "":
				case s == "env_prefix:None":
					p.envPrefix = ""
				case len(f) == 6 && f[0].is(tIdent, "env_prefix") && f[2].is(tIdent, "Some") && f[4].kind == tStr:
					p.envPrefix = f[4].text
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
			return fmt.Errorf("cannot read parse_args argument %s", render(arg))
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

package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
	"github.com/materializeinc/orchestratord/hack/internal/rustsrc/rustsrctest"
)

const testCli = `
pub fn parse_args<O>(config: CliConfig) -> O where O: Parser {
    let command = O::command();
    let arg_envs: Vec<_> = command
        .get_arguments()
        .filter_map(|arg| match (config.env_prefix, arg.get_env()) {
            (Some(prefix), Some(env)) => {
                let mut prefixed_env = OsString::from(prefix);
                prefixed_env.push(env);
                Some((arg.get_id(), prefixed_env))
            }
            _ => None,
        })
        .collect();
    let mut clap = O::command().args_override_self(true);
    if !config.enable_version_flag {
        clap = clap.disable_version_flag(true);
    }
    for (arg, env) in &arg_envs {
        clap = clap.mut_arg(*arg, |arg| arg.env_os(env));
    }
    O::from_arg_matches(&clap.get_matches()).unwrap()
}

impl<K, V> FromStr for KeyValueArg<K, V>
where
    K: FromStr,
    K::Err: Display,
    V: FromStr,
    V::Err: Display,
{
    type Err = String;

    fn from_str(s: &str) -> Result<KeyValueArg<K, V>, String> {
        let mut parts = s.splitn(2, '=');
        let key = parts.next().expect("always one part");
        let value = parts
            .next()
            .ok_or_else(|| "must have format KEY=VALUE".to_string())?;
        Ok(KeyValueArg {
            key: key.parse().map_err(|e| format!("parsing key: {}", e))?,
            value: value.parse().map_err(|e| format!("parsing value: {}", e))?,
        })
    }
}
`

const testLock = `
[[package]]
name = "humantime"
version = "2.3.0"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "mz-prog"
version = "0.1.0"
`

const testMain = `
//! A test program.
use clap::{ArgAction, Parser, ValueEnum};
use mz_ore::cli::{self, CliConfig};
use mz_other::Flattened;

/// Doc comment with "quotes", 'c' and a #[fake(attribute)].
#[derive(Parser, Debug)]
#[clap(name = "prog", version = VERSION.as_str())]
pub struct Args {
    /// Multi-line
    /* block /* nested */ comment */
    #[clap(
        long,
        env = "PATH_ARG", // trailing comment
        value_name = "PATH",
        action = ArgAction::Set,
    )]
    path_arg: PathBuf,
    #[structopt(long, value_enum, env = "MODE", default_value_t)]
    mode: Mode,
    #[arg(long = "renamed", visible_alias = "old-name", value_delimiter = ';', requires = "path_arg")]
    list: Vec<String>,
    #[clap(long, value_parser = clap::value_parser!(u16).range(1..=10), default_value = LIMIT.to_string())]
    limit: u16,
    #[clap(long, value_parser = parse_pair::<String, String>, default_value = r#"a"b"#)]
    pair: (String, String),
    #[clap(long, required_if_eq("mode", "very-fast"), default_value_if("mode", "slow", Some("s")))]
    speed: Option<String>,
    #[clap(long, action = ArgAction::Set)]
    explicit_bool: bool,
    #[clap(long)]
    maybe_bool: Option<bool>,
    #[clap(flatten)]
    flat: Flattened,
    #[clap(skip)]
    skipped: u8,
    #[cfg(feature = "on")]
    #[clap(long)]
    feature_on: bool,
    #[cfg(not(feature = "on"))]
    #[clap(long)]
    feature_off: bool,
    #[clap(long, value_parser = humantime::parse_duration, default_value = "1s")]
    timeout: Duration,
    #[clap(long)]
    listen: Addr,
    #[clap(long)]
    ip: Option<IpAddr>,
    #[clap(long)]
    label: Vec<KeyValueArg<String, String>>,
    #[clap(long)]
    not_ipnet: Option<IpNet>,
}

#[derive(ValueEnum, Clone, Default)]
enum Mode {
    #[default]
    Slow,
    VeryFast,
    #[value(name = "custom")]
    Renamed,
    #[value(skip)]
    Hidden,
}

const LIMIT: u16 = 5;

use mz_other::IpNet;
use mz_ore::cli::KeyValueArg;
use std::net::{IpAddr, SocketAddr as Addr};

fn main() {
    let args: Args = cli::parse_args(CliConfig {
        env_prefix: Some("MZ_"),
        ..Default::default()
    });
}
`

const testOther = `
#[derive(clap::Args)]
pub struct Flattened {
    /// Env defaults to the field name.
    #[arg(long, env)]
    pub inner_thing: Option<u64>,
}
`

func testTree(t *testing.T, main string) map[string]string {
	return map[string]string{
		"src/ore/src/cli.rs":     testCli,
		"src/prog/Cargo.toml":    "[package]\nname = \"mz-prog\"\n\n[features]\ndefault = [\"on\"]\non = []\n",
		"src/prog/src/main.rs":   main,
		"src/other/Cargo.toml":   "[package]\nname = \"mz-other\"\n",
		"src/other/src/lib.rs":   testOther,
		"src/unrelated/src/x.rs": "struct Flattened2; // mentions Flattened only in a comment",
		"Cargo.lock":             testLock,
	}
}

func generate(t *testing.T, files map[string]string) (*Command, error) {
	t.Helper()
	up, err := rustsrc.Open(rustsrctest.Tree(t, files), "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkParseArgs(up); err != nil {
		t.Fatal(err)
	}
	g := &gen{up: up, features: featureFlags{}}
	if err := g.indexValueEnums(); err != nil {
		t.Fatal(err)
	}
	return g.program(&program{name: "prog", main: "src/prog/src/main.rs", strct: "Args"})
}

func TestGenerate(t *testing.T) {
	cmd, err := generate(t, testTree(t, testMain))
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Version {
		t.Errorf("version flag enabled although enable_version_flag is false")
	}
	got := map[string]*Arg{}
	var order []string
	for _, a := range cmd.Args {
		got[a.ID] = a
		order = append(order, a.ID)
	}
	if want := []string{"path_arg", "mode", "list", "limit", "pair", "speed", "explicit_bool", "maybe_bool", "inner_thing", "feature_on",
		"timeout", "listen", "ip", "label", "not_ipnet"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("args = %q, want %q", order, want)
	}
	check := func(id string, want Arg) {
		t.Helper()
		a := *got[id]
		a.Origin, a.RustType = "", ""
		if !reflect.DeepEqual(a, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", id, a, want)
		}
	}
	check("path_arg", Arg{ID: "path_arg", Long: "path-arg", Env: "MZ_PATH_ARG", Action: Set, ValueName: "PATH", Required: true, Parser: Parser{Kind: Path}})
	check("mode", Arg{ID: "mode", Long: "mode", Env: "MZ_MODE", Action: Set, ValueName: "MODE", Default: []string{"slow"},
		Parser: Parser{Kind: Enum, Values: []PossibleValue{{Name: "slow"}, {Name: "very-fast"}, {Name: "custom"}}}})
	check("list", Arg{ID: "list", Long: "renamed", Aliases: []string{"old-name"}, Action: Append, ValueName: "LIST", Delimiter: ';',
		Requires: []string{"path_arg"}, Parser: Parser{Kind: String}})
	check("limit", Arg{ID: "limit", Long: "limit", Action: Set, ValueName: "LIMIT", Default: []string{"5"},
		Parser: Parser{Kind: Int, Int: &IntRange{Bounded: true, Min: "1", Max: "10"}, Expr: "clap::value_parser!(u16).range(1..=10)"}})
	check("pair", Arg{ID: "pair", Long: "pair", Action: Set, ValueName: "PAIR", Default: []string{`a"b`},
		Parser: Parser{Kind: Unchecked, Expr: "parse_pair::<String, String>"}})
	check("speed", Arg{ID: "speed", Long: "speed", Action: Set, ValueName: "SPEED",
		DefaultIf: []DefaultIf{{Arg: "mode", Equals: "slow", Value: "s"}}, RequiredIfEq: []Cond{{Arg: "mode", Value: "very-fast"}},
		Parser: Parser{Kind: String}})
	check("explicit_bool", Arg{ID: "explicit_bool", Long: "explicit-bool", Action: Set, ValueName: "EXPLICIT_BOOL", Required: true, Parser: Parser{Kind: Bool}})
	check("maybe_bool", Arg{ID: "maybe_bool", Long: "maybe-bool", Action: Set, ValueName: "MAYBE_BOOL", Parser: Parser{Kind: Bool}})
	check("inner_thing", Arg{ID: "inner_thing", Long: "inner-thing", Env: "MZ_INNER_THING", Action: Set, ValueName: "INNER_THING",
		Parser: Parser{Kind: Int, Int: &IntRange{Unsigned: true}}})
	check("feature_on", Arg{ID: "feature_on", Long: "feature-on", Action: SetTrue, Parser: Parser{Kind: Bool}})
	// Value parsers package clap models, by the path the file imports.
	check("timeout", Arg{ID: "timeout", Long: "timeout", Action: Set, ValueName: "TIMEOUT", Default: []string{"1s"},
		Parser: Parser{Kind: Duration, Expr: "humantime::parse_duration"}})
	check("listen", Arg{ID: "listen", Long: "listen", Action: Set, ValueName: "LISTEN", Required: true,
		Parser: Parser{Kind: SocketAddr, Expr: "FromStr for Addr"}})
	check("ip", Arg{ID: "ip", Long: "ip", Action: Set, ValueName: "IP", Parser: Parser{Kind: IPAddr, Expr: "FromStr for IpAddr"}})
	check("label", Arg{ID: "label", Long: "label", Action: Append, ValueName: "LABEL",
		Parser: Parser{Kind: KeyValueArg, Expr: "FromStr for KeyValueArg<String, String>"}})
	// Another crate's IpNet is not ipnet's.
	check("not_ipnet", Arg{ID: "not_ipnet", Long: "not-ipnet", Action: Set, ValueName: "NOT_IPNET",
		Parser: Parser{Kind: Unchecked, Expr: "FromStr for IpNet"}})
}

// A modelled parser whose upstream source or locked crate version changed
// fails the run: the model may be stale.
func TestGenerateStaleValueParser(t *testing.T) {
	files := testTree(t, testMain)
	files["src/ore/src/cli.rs"] = strings.Replace(testCli, `"must have format KEY=VALUE"`, `"want KEY=VALUE"`, 1)
	_, err := generate(t, files)
	if err == nil || !strings.Contains(err.Error(), "Args.label") || !strings.Contains(err.Error(), "KeyValueArg::from_str") ||
		!strings.Contains(err.Error(), "may be stale") {
		t.Errorf("changed KeyValueArg::from_str: err = %v", err)
	}
	// Comments, doc comments included, are not the model's business.
	files = testTree(t, testMain)
	files["src/ore/src/cli.rs"] = strings.Replace(testCli, "    fn from_str(s: &str)", "    /// Parses KEY=VALUE.\n    /** More. */\n    // Not a doc.\n    fn from_str(s: &str)", 1)
	if files["src/ore/src/cli.rs"] == testCli {
		t.Fatal("the fixture has no fn from_str")
	}
	if _, err := generate(t, files); err != nil {
		t.Errorf("documented KeyValueArg::from_str: %v", err)
	}
	files = testTree(t, testMain)
	files["Cargo.lock"] = strings.Replace(testLock, `version = "2.3.0"`, `version = "2.4.0"`, 1)
	_, err = generate(t, files)
	if err == nil || !strings.Contains(err.Error(), "Args.timeout") ||
		!strings.Contains(err.Error(), "the model follows humantime 2.3.0; Cargo.lock locks 2.4.0") {
		t.Errorf("humantime 2.4.0: err = %v", err)
	}
}

// The generator must refuse what it does not understand, naming the field.
func TestGenerateFailsLoudly(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{`#[clap(long)]
    maybe_bool`, `#[clap(long, frobnicate = 3)]
    maybe_bool`, "Args.maybe_bool (src/prog/src/main.rs:33): attribute frobnicate is not handled"},
		{`#[clap(long)]
    maybe_bool`, `#[clap(long, num_args = 0..=1)]
    maybe_bool`, "Args.maybe_bool (src/prog/src/main.rs:33): attribute num_args is not handled"},
		{`#[clap(long)]
    maybe_bool`, `#[clap(long)]
    #[cfg_attr(test, clap(hide = true))]
    maybe_bool`, "Args.maybe_bool"},
		{`#[clap(long)]
    maybe_bool`, `#[clap(long, default_value = some_fn())]
    maybe_bool`, "cannot evaluate default"},
		{`#[cfg(feature = "on")]`, `#[cfg(debug_assertions)]`, "cannot evaluate cfg(debug_assertions)"},
		{`#[clap(long)]
    maybe_bool`, `#[clap(requires = "nope")]
    maybe_bool`, "positional arguments are not handled"},
		{`requires = "path_arg"`, `requires = "nope"`, `refers to unknown argument "nope"`},
		{`#[value(skip)]`, `#[value(rename_all = "snake")]`, "Mode::Hidden"},
	} {
		main := strings.Replace(testMain, tc.from, tc.to, 1)
		if main == testMain {
			t.Fatalf("test case %q does not apply", tc.to)
		}
		_, err := generate(t, testTree(t, main))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("with %q: err = %v, want it to contain %q", tc.to, err, tc.want)
		}
	}
}

// A feature of another crate that the program does not depend on directly
// cannot be decided from the manifests.
func TestGenerateUndecidedFeature(t *testing.T) {
	files := testTree(t, testMain)
	files["src/other/src/lib.rs"] = strings.Replace(testOther, "#[arg(long, env)]", "#[cfg(feature = \"x\")]\n    #[arg(long, env)]", 1)
	_, err := generate(t, files)
	if err == nil || !strings.Contains(err.Error(), "Flattened.inner_thing") || !strings.Contains(err.Error(), "pass -feature src/other:x=on") {
		t.Errorf("err = %v", err)
	}
	files["src/prog/Cargo.toml"] += "\n[dependencies]\nmz-other = { path = \"../other\", default-features = false, features = [\"x\"] }\n"
	cmd, err := generate(t, files)
	if err != nil {
		t.Fatal(err)
	}
	if lookup(cmd, "inner-thing") == nil {
		t.Errorf("--inner-thing missing although mz-other is built with feature x")
	}
}

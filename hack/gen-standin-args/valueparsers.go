package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
)

// The value parsers package clap models (test/standin/clap, values.go and
// url.go), by the path of the Rust type or function as the field's file
// imports it. A value parser not listed stays Unchecked, so a new type is
// visible in the tables.
//
// The model is only right for the sources it was written from, so each
// entry names what it relies on: items of upstream's own code, compared
// token by token (comments, doc comments included, and layout do not
// matter), and crate versions in Cargo.lock. When one differs the
// generator fails: review the change, update the model, then the entry
// here.
type valueParser struct {
	kind ParserKind
	// expr replaces the generated Parser.Expr, for types clap does not
	// parse with FromStr.
	expr   string
	items  []upstreamItem
	crates []string // "name version" in Cargo.lock
}

// upstreamItem is an item of upstream's source: the one starting with the
// tokens of anchor and ending with the brace that closes its body (or the
// semicolon after it, for a declaration without a body), rendered by render.
type upstreamItem struct {
	file, anchor, what string
	want               string
}

var (
	keyValueArgItem = upstreamItem{"src/ore/src/cli.rs", "impl<K, V> FromStr for KeyValueArg<K, V>", "KeyValueArg::from_str",
		"impl<K, V>FromStr for KeyValueArg<K, V>where K:FromStr, K::Err:Display, V:FromStr, V::Err:Display, {type Err = String;fn from_str(s:&str)->Result<KeyValueArg<K, V>, String>{let mut parts = s.splitn(2, '=');let key = parts.next().expect(\"always one part\");let value = parts.next().ok_or_else(||\"must have format KEY=VALUE\".to_string())?;Ok(KeyValueArg{key:key.parse().map_err(|e|format!(\"parsing key: {}\", e))?, value:value.parse().map_err(|e|format!(\"parsing value: {}\", e))?, })}}"}
)

var valueParsers = map[string]valueParser{
	"humantime::parse_duration": {kind: Duration, crates: []string{"humantime 2.3.0"}},
	"std::net::SocketAddr":      {kind: SocketAddr},
	"std::net::IpAddr":          {kind: IPAddr},
	"mz_ore::netio::SocketAddr": {kind: NetioSocketAddr, expr: "FromStr for mz_ore::netio::SocketAddr", items: []upstreamItem{
		{"src/ore/src/netio/socket.rs", "use std::net::SocketAddr as InetSocketAddr;", "InetSocketAddr",
			`use std::net::SocketAddr as InetSocketAddr;`},
		{"src/ore/src/netio/socket.rs", "pub fn guess(s: &str) -> SocketAddrType", "SocketAddrType::guess",
			`pub fn guess(s:&str)->SocketAddrType{if s.starts_with('/'){SocketAddrType::Unix}else if s.starts_with("turmoil:"){SocketAddrType::Turmoil}else{SocketAddrType::Inet}}`},
		{"src/ore/src/netio/socket.rs", "impl FromStr for SocketAddr", "SocketAddr::from_str",
			"impl FromStr for SocketAddr{type Err = AddrParseError;fn from_str(s:&str)->Result<SocketAddr, AddrParseError>{match SocketAddrType::guess(s){SocketAddrType::Unix = >{let addr = UnixSocketAddr::from_pathname(s).map_err(|e|AddrParseError{kind:AddrParseErrorKind::Unix(e), })?;Ok(SocketAddr::Unix(addr))}SocketAddrType::Inet = >{let addr = s.parse().map_err(|_|AddrParseError{kind:AddrParseErrorKind::Inet, })?;Ok(SocketAddr::Inet(addr))}SocketAddrType::Turmoil = >{let addr = s.strip_prefix(\"turmoil:\").ok_or(AddrParseError{kind:AddrParseErrorKind::Turmoil, })?;Ok(SocketAddr::Turmoil(addr.into()))}}}}"},
		{"src/ore/src/netio/socket.rs", "pub fn from_pathname<S>(path: S)", "UnixSocketAddr::from_pathname",
			"pub fn from_pathname<S>(path:S)->Result<UnixSocketAddr, io::Error>where S:Into<String>, {let path = path.into();let _ = std::os::unix::net::SocketAddr::from_pathname(&path)?;Ok(UnixSocketAddr{path:Some(path)})}"},
		{"src/ore/src/netio/socket.rs", "impl fmt::Display for AddrParseError", "AddrParseError's Display",
			"impl fmt::Display for AddrParseError{fn fmt(&self, f:&mut fmt::Formatter)->fmt::Result{match&self.kind{AddrParseErrorKind::Inet = >f.write_str(\"invalid internet socket address syntax\"), AddrParseErrorKind::Unix(e)=>{f.write_str(\"invalid unix socket address syntax: \")?;e.fmt(f)}AddrParseErrorKind::Turmoil = >f.write_str(\"missing 'turmoil:' prefix\"), }}}"},
	}},
	"ipnet::IpNet":              {kind: IPNet, crates: []string{"ipnet 2.12.1"}},
	"uuid::Uuid":                {kind: UUID, crates: []string{"uuid 1.24.1"}},
	"http::header::HeaderValue": {kind: HeaderValue, crates: []string{"http 1.4.2"}},
	"mz_ore::cli::KeyValueArg<String, String>": {kind: KeyValueArg, items: []upstreamItem{keyValueArgItem}},
	"mz_ore::cli::KeyValueArg<http::header::HeaderName, http::header::HeaderValue>": {kind: HeaderKeyValueArg,
		items: []upstreamItem{keyValueArgItem}, crates: []string{"http 1.4.2"}},
	"self::parse_key_val::<String, String>": {kind: KeyValPair, items: []upstreamItem{
		{"src/balancerd/src/bin/balancerd.rs", "fn parse_key_val<T, U>", "parse_key_val",
			"fn parse_key_val<T, U>(s:&str)->Result<(T, U), Box<dyn Error+Send+Sync+'static>>where T:std::str::FromStr, T::Err:Error+Send+Sync+'static, U:std::str::FromStr, U::Err:Error+Send+Sync+'static, {let pos = s.find('=').ok_or_else(||format!(\"invalid KEY=value: no `=` found in `{s}`\"))?;Ok((s[..pos].parse()?, s[pos+1..].parse()?))}"},
	}},
	"mz_ore::url::SensitiveUrl": {kind: URL, crates: []string{"url 2.5.8", "idna 1.1.0"}, items: []upstreamItem{
		{"src/ore/src/url.rs", "impl FromStr for SensitiveUrl", "SensitiveUrl::from_str",
			"impl FromStr for SensitiveUrl{type Err = url::ParseError;fn from_str(s:&str)->Result<Self, Self::Err>{Ok(Self(Url::from_str(s)?))}}"},
		{"src/ore/src/url.rs", "impl clap::builder::TypedValueParser for SensitiveUrlParser", "SensitiveUrlParser",
			"impl clap::builder::TypedValueParser for SensitiveUrlParser{type Value = SensitiveUrl;fn parse_ref(&self, cmd:&clap::Command, arg:Option<&clap::Arg>, value:&std::ffi::OsStr, )->Result<Self::Value, clap::Error>{let s = value.to_str().ok_or_else(||clap::Error::new(clap::error::ErrorKind::InvalidUtf8).with_cmd(cmd))?;let url = s.parse().map_err(|_e|{let mut err = clap::Error::new(clap::error::ErrorKind::ValueValidation);if let Some(arg)=arg{err.insert(clap::error::ContextKind::InvalidArg, clap::error::ContextValue::String(arg.to_string()), );}err.insert(clap::error::ContextKind::InvalidValue, clap::error::ContextValue::String(\"<redacted>\".to_string()), );err})?;Ok(SensitiveUrl(url))}}"},
		{"src/ore/src/url.rs", "impl clap::builder::ValueParserFactory for SensitiveUrl", "SensitiveUrl's ValueParserFactory",
			"impl clap::builder::ValueParserFactory for SensitiveUrl{type Parser = SensitiveUrlParser;fn value_parser()->Self::Parser{SensitiveUrlParser}}"},
	}},
	"mz_tracing::CloneableEnvFilter": {kind: EnvFilter, crates: []string{"tracing-subscriber 0.3.23", "tracing-core 0.1.36"}, items: []upstreamItem{
		{"src/tracing/src/lib.rs", "impl FromStr for CloneableEnvFilter", "CloneableEnvFilter::from_str",
			"impl FromStr for CloneableEnvFilter{type Err = tracing_subscriber::filter::ParseError;fn from_str(s:&str)->Result<Self, Self::Err>{let filter:EnvFilter = s.parse()?;Ok(CloneableEnvFilter{filter, validated:ValidatedEnvFilterString(s.to_string()), })}}"},
	}},
	"mz_sql::catalog::EnvironmentId": {kind: EnvironmentID, items: []upstreamItem{
		{"src/sql/src/catalog.rs", "impl FromStr for EnvironmentId", "EnvironmentId::from_str",
			"impl FromStr for EnvironmentId{type Err = InvalidEnvironmentIdError;fn from_str(s:&str)->Result<EnvironmentId, InvalidEnvironmentIdError>{static MATCHER:LazyLock<Regex>=LazyLock::new(||{Regex::new(\"^(?P<cloud_provider>[[:alnum:]]+)-(?P<cloud_provider_region>[[:alnum:]\\\\-]+)-(?P<organization_id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-(?P<ordinal>\\\\d{1,8})$\").unwrap()});let captures = MATCHER.captures(s).ok_or(InvalidEnvironmentIdError)?;Ok(EnvironmentId{cloud_provider:CloudProvider::from_str(&captures[\"cloud_provider\"])?, cloud_provider_region:captures[\"cloud_provider_region\"].into(), organization_id:captures[\"organization_id\"].parse().map_err(|_|InvalidEnvironmentIdError)?, ordinal:captures[\"ordinal\"].parse().map_err(|_|InvalidEnvironmentIdError)?, })}}"},
		{"src/sql/src/catalog.rs", "impl fmt::Display for InvalidEnvironmentIdError", "InvalidEnvironmentIdError's Display",
			`impl fmt::Display for InvalidEnvironmentIdError{fn fmt(&self, f:&mut fmt::Formatter)->fmt::Result{f.write_str("invalid environment ID")}}`},
		{"src/cloud-provider/src/lib.rs", "impl FromStr for CloudProvider", "CloudProvider::from_str",
			"impl FromStr for CloudProvider{type Err = InvalidCloudProviderError;fn from_str(s:&str)->Result<CloudProvider, InvalidCloudProviderError>{match s.to_lowercase().as_ref(){\"local\" = >Ok(CloudProvider::Local), \"docker\" = >Ok(CloudProvider::Docker), \"mzcompose\" = >Ok(CloudProvider::MzCompose), \"cloudtest\" = >Ok(CloudProvider::Cloudtest), \"aws\" = >Ok(CloudProvider::Aws), \"gcp\" = >Ok(CloudProvider::Gcp), \"azure\" = >Ok(CloudProvider::Azure), \"generic\" = >Ok(CloudProvider::Generic), _ = >Err(InvalidCloudProviderError), }}}"},
	}},
	// clap prefers From<String> to FromStr (value_parser!'s autoref order):
	// StringValueParser, then From.
	"mz_auth::password::Password": {kind: Text, expr: "From<String> for Password", items: []upstreamItem{
		{"src/auth/src/password.rs", "impl From<String> for Password", "Password's From<String>",
			"impl From<String>for Password{fn from(password:String)->Self{Password(password)}}"},
	}},
	// clusterd's timely configs: serde_json into a struct without serde
	// attributes (test/standin/clap/timely.go).
	"mz_cluster_client::client::TimelyConfig": {kind: TimelyConfig, crates: []string{"serde_json 1.0.151"}, items: []upstreamItem{
		{"src/cluster-client/src/client.rs", "pub struct TimelyConfig", "TimelyConfig",
			"pub struct TimelyConfig{pub workers:usize, pub process:usize, pub addresses:Vec<String>, pub arrangement_exert_proportionality:u32, pub enable_zero_copy:bool, pub enable_zero_copy_lgalloc:bool, pub zero_copy_limit:Option<usize>, }"},
		{"src/cluster-client/src/client.rs", "impl FromStr for TimelyConfig", "TimelyConfig::from_str",
			"impl FromStr for TimelyConfig{type Err = serde_json::Error;fn from_str(s:&str)->serde_json::Result<Self>{serde_json::from_str(s)}}"},
	}},
	"mz_cloud_resources::AwsExternalIdPrefix::new_from_cli_argument_or_environment_variable": {kind: Text, items: []upstreamItem{
		{"src/cloud-resources/src/vpc_endpoint.rs", "pub fn new_from_cli_argument_or_environment_variable", "AwsExternalIdPrefix::new_from_cli_argument_or_environment_variable",
			"pub fn new_from_cli_argument_or_environment_variable(aws_external_id_prefix:&str, )->Result<AwsExternalIdPrefix, Infallible>{Ok(AwsExternalIdPrefix(aws_external_id_prefix.into()))}"},
	}},
}

// modelled returns p with the modelled kind of the parser named key, after
// checking what the model relies on; p unchanged if key is not modelled.
func (g *gen) modelled(p Parser, key, where string) (Parser, error) {
	vp, ok := valueParsers[key]
	if !ok {
		return p, nil
	}
	if g.history {
		p.Kind = vp.kind
		if vp.expr != "" {
			p.Expr = vp.expr
		}
		return p, nil
	}
	for _, it := range vp.items {
		if err := g.checkItem(it); err != nil {
			return p, fmt.Errorf("%s: %s (%v): the stand-in's model of %s may be stale: review the change in test/standin/clap and update hack/gen-standin-args/valueparsers.go", where, key, err, it.what)
		}
		g.used(it.file, it.what)
	}
	for _, c := range vp.crates {
		if err := g.checkLocked(c); err != nil {
			return p, fmt.Errorf("%s: %s: %v: review the crate's parser and update test/standin/clap and hack/gen-standin-args/valueparsers.go", where, key, err)
		}
		g.used("Cargo.lock", c)
	}
	p.Kind = vp.kind
	if vp.expr != "" {
		p.Expr = vp.expr
	}
	return p, nil
}

// checkItem compares an item of upstream's source with what the model was
// written from.
func (g *gen) checkItem(it upstreamItem) error {
	got, err := g.item(it.file, it.anchor)
	if err != nil {
		return err
	}
	if got != it.want {
		return fmt.Errorf("%s: %s is now\n\t%s\nwas\n\t%s", it.file, it.what, got, it.want)
	}
	return nil
}

// item renders the item of file that starts with anchor's tokens, without
// its documentation.
func (g *gen) item(file, anchor string) (string, error) {
	toks, err := g.up.Tokens(file)
	if err != nil {
		return "", err
	}
	toks = rustsrc.StripDocs(toks)
	want, err := rustsrc.Lex(anchor)
	if err != nil {
		return "", err
	}
	found := -1
	for i := 0; i+len(want) <= len(toks) && found < 0; i++ {
		match := true
		for j, w := range want {
			if toks[i+j].Kind != w.Kind || toks[i+j].Text != w.Text {
				match = false
				break
			}
		}
		if match {
			found = i
		}
	}
	if found < 0 {
		return "", fmt.Errorf("%s: %q not found", file, anchor)
	}
	end := found + len(want) - 1
	if !toks[end].IsPunct(";") {
		for end = found + len(want); end < len(toks) && !toks[end].IsPunct("{") && !toks[end].IsPunct(";"); end++ {
		}
		if end == len(toks) {
			return "", fmt.Errorf("%s: %q has no body", file, anchor)
		}
		if toks[end].IsPunct("{") {
			if end, err = rustsrc.Matching(toks, end); err != nil {
				return "", fmt.Errorf("%s: %v", file, err)
			}
		}
	}
	return rustsrc.Render(toks[found : end+1]), nil
}

// checkLocked wants "name version" in Cargo.lock.
func (g *gen) checkLocked(crate string) error {
	name, version, _ := strings.Cut(crate, " ")
	packages, err := g.up.Locked()
	if err != nil {
		return err
	}
	var locked []string
	for _, p := range packages {
		if p.Name == name {
			if p.Version == version {
				return nil
			}
			locked = append(locked, p.Version)
		}
	}
	sort.Strings(locked)
	return fmt.Errorf("the model follows %s %s; Cargo.lock locks %s", name, version, strings.Join(append(locked, "none")[:max(1, len(locked))], ", "))
}

// typeKey is the key of a field type in valueParsers: its path with the
// imported name resolved, and its type arguments.
func (g *gen) typeKey(t rustsrc.Type, file string) (string, error) {
	path, err := g.resolve(t.Path, file)
	if err != nil {
		return "", err
	}
	key := strings.Join(path, "::")
	if len(t.Args) > 0 {
		var args []string
		for _, a := range t.Args {
			k, err := g.typeKey(a, file)
			if err != nil {
				return "", err
			}
			args = append(args, k)
		}
		key += "<" + strings.Join(args, ", ") + ">"
	}
	return key, nil
}

// resolve replaces the first segment of a path by what file imports under
// that name; a function the file defines itself is "self::name".
func (g *gen) resolve(path []string, file string) ([]string, error) {
	uses, err := g.uses(file)
	if err != nil {
		return nil, err
	}
	if full, ok := uses[path[0]]; ok {
		return append(append([]string{}, full...), path[1:]...), nil
	}
	if len(path) == 1 {
		toks, err := g.up.Tokens(file)
		if err != nil {
			return nil, err
		}
		for i := 0; i+1 < len(toks); i++ {
			if toks[i].Is(rustsrc.Ident, "fn") && toks[i+1].Is(rustsrc.Ident, path[0]) {
				return []string{"self", path[0]}, nil
			}
		}
	}
	return path, nil
}

// exprKey is the key of an explicit value_parser that is a path, maybe with
// a turbofish: "humantime::parse_duration", "parse_key_val::<String, String>".
func (g *gen) exprKey(toks []rustsrc.Token, file string) (string, bool, error) {
	var path []string
	i := 0
	for i < len(toks) {
		if toks[i].Kind != rustsrc.Ident {
			return "", false, nil
		}
		path = append(path, toks[i].Text)
		i++
		if i == len(toks) {
			break
		}
		if i+1 >= len(toks) || !toks[i].IsPunct(":") || !toks[i+1].IsPunct(":") {
			return "", false, nil
		}
		i += 2
		if i < len(toks) && toks[i].IsPunct("<") {
			break
		}
	}
	if len(path) == 0 {
		return "", false, nil
	}
	full, err := g.resolve(path, file)
	if err != nil {
		return "", false, err
	}
	key := strings.Join(full, "::")
	if i < len(toks) {
		// ::<T, U>
		if !toks[len(toks)-1].IsPunct(">") {
			return "", false, nil
		}
		var args []string
		for _, p := range rustsrc.SplitTop(toks[i+1 : len(toks)-1]) {
			t, err := rustsrc.ParseType(p)
			if err != nil {
				return "", false, nil
			}
			k, err := g.typeKey(t, file)
			if err != nil {
				return "", false, err
			}
			args = append(args, k)
		}
		key += "::<" + strings.Join(args, ", ") + ">"
	}
	return key, true, nil
}

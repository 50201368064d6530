package clap

import (
	"errors"
	"strings"
	"testing"
)

// valueCase is one value for a parser: want is the Rust error's text, ""
// when the value parses.
type valueCase struct{ in, want string }

func checkCases(t *testing.T, name string, parse func(string) error, cases []valueCase) {
	t.Helper()
	for _, c := range cases {
		err := parse(c.in)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s(%q) = %q, want %q", name, c.in, got, c.want)
		}
	}
}

// Accepted values in a table, for brevity.
func ok(values ...string) []valueCase {
	var out []valueCase
	for _, v := range values {
		out = append(out, valueCase{v, ""})
	}
	return out
}

func refused(want string, values ...string) []valueCase {
	var out []valueCase
	for _, v := range values {
		out = append(out, valueCase{v, want})
	}
	return out
}

func cases(groups ...[]valueCase) []valueCase {
	var out []valueCase
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func TestStdSocketAddrAndIpAddr(t *testing.T) {
	const bad = "invalid socket address syntax"
	checkCases(t, "SocketAddr", parseSocketAddr, cases(
		ok("127.0.0.1:6879", "0.0.0.0:0", "1.2.3.4:0080", "[::1]:80", "[::]:65535", "[fe80::1%2]:80",
			"[::ffff:1.2.3.4]:1", "[1:2:3:4:5:6:7:8]:1", "[::1:2:3:4:5:6:7]:1", "[1:2:3:4:5:6:7::]:1"),
		refused(bad, "localhost:6879", "127.0.0.1", ":6879", "127.0.0.1:65536", "127.0.0.01:80", "256.0.0.1:1",
			"::1:80", "[::1]", "[::1]:", "1.2.3.4:80 ", " 1.2.3.4:80", "[1.2.3.4]:80", "", "[::1%]:80",
			"[fe80::1%4294967296]:80", "[1:2:3:4:5:6:7:8::]:1", "[1:2:3:4:5:6:7:8:9]:1", "[1::2::3]:1", "1.2.3.4:+80",
			"[::1]:80x", "http://1.2.3.4:80"),
	))
	checkCases(t, "IpAddr", parseIPAddr, cases(
		ok("0.0.0.0", "127.0.0.1", "::", "::1", "fe80::1", "::ffff:10.0.0.1", "1:2:3:4:5:6:7:8", "1::", "1:2:3:4:5:6:7::",
			"1:2:3:4:5:6:1.2.3.4", "FE80::A"),
		refused("invalid IP address syntax", "localhost", "1.2.3.4:80", "01.2.3.4", "1.2.3", "1.2.3.4.5", "::1%1",
			"[::1]", "", " 1.2.3.4", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7:8::", "::1.2.3.04", "1.2.3.4::", ":::",
			"1:2:3:4:5:6:7:1.2.3.4", "12345::"),
	))
}

func TestNetioSocketAddr(t *testing.T) {
	checkCases(t, "mz_ore::netio::SocketAddr", parseNetioSocketAddr, cases(
		ok("127.0.0.1:6669", "[::1]:6669", "/tmp/console.sock", "turmoil:anything", "turmoil:", "/"+strings.Repeat("a", 106)),
		refused("invalid internet socket address syntax", "localhost:6669", "relative/console.sock", "turmoil", ""),
		refused("invalid unix socket address syntax: path must be shorter than SUN_LEN", "/"+strings.Repeat("a", 107)),
		refused("invalid unix socket address syntax: paths must not contain interior null bytes", "/a\x00b"),
	))
}

func TestIPNet(t *testing.T) {
	checkCases(t, "IpNet", parseIPNet, cases(
		// ipnet's own parser allows leading zeros and a "::" standing for
		// no group, which std refuses.
		ok("10.0.0.0/8", "1.2.3.4/32", "0.0.0.0/0", "01.02.03.04/24", "1.2.3.4/08", "::/0", "fe80::/10",
			"2001:db8::/128", "1:2:3:4::5:6:7:8/64", "::ffff:1.2.3.4/96", "::/007"),
		refused("invalid IP address syntax", "10.0.0.0", "10.0.0.0/33", "::/129", "10.0.0.0/8 ", "10.0.0.0/008",
			"256.0.0.0/8", "10.0.0.0/", "fe80::1%2/64", "", "1.2.3.4/32/1", "0001.2.3.4/8", "::/0128", "10.0.0.0/-1",
			"localhost/8"),
	))
}

func TestUUID(t *testing.T) {
	const id = "9f00a1b2-0000-4000-8000-000000000001"
	checkCases(t, "Uuid", parseUUID, cases(
		ok(id, strings.ToUpper(id), strings.ReplaceAll(id, "-", ""), "{"+id+"}", "urn:uuid:"+id),
		[]valueCase{
			{"", "invalid length: expected length 32 for simple format, found 0"},
			{"abc", "invalid length: expected length 32 for simple format, found 3"},
			{id[:35] + "g", "invalid character: found `g` at 36"},
			{id[:35] + "é", "invalid character: found `é` at 36"},
			{"9f00a1b2-0000-4000-8000", "invalid group count: expected 5, found 4"},
			{"9f00a1b2-000-4000-8000-0000000000001", "invalid group length in group 1: expected 4, found 3"},
			{id + "1", "invalid group length in group 4: expected 12, found 13"},
			// google/uuid (under pkg/mzuuid) ignores what wraps 36 characters.
			{"(" + id + ")", "invalid character: found `(` at 1"},
			{"URN:UUID:" + id, "invalid character: found `U` at 1"},
			{"{" + id, "invalid character: found `{` at 1"},
			{"{}", "invalid group count: expected 5, found 1"},
			{"urn:uuid:" + strings.ReplaceAll(id, "-", ""), "invalid group count: expected 5, found 1"},
		}))
}

func TestHeaderNameAndValue(t *testing.T) {
	checkCases(t, "HeaderValue", parseHeaderValue, cases(
		ok("https://console.example.com", "*", "", "tab\there", "é", "~!@#$%^&*()"),
		refused("failed to parse header value", "a\nb", "a\rb", "\x7f", "\x00", "\x1b[0m"),
	))
	checkCases(t, "HeaderName", parseHeaderName, cases(
		ok("x-api-key", "Authorization", "!#$%&'*+-.^_`|~09azAZ", strings.Repeat("a", 65535)),
		refused("invalid HTTP header name", "", "bad key", "k\"", "k:", "é", "a(b)", strings.Repeat("a", 65536)),
	))
}

func TestKeyValueArgs(t *testing.T) {
	checkCases(t, "KeyValueArg<String, String>", func(s string) error { return parseKeyValueArg(s, nil, nil) }, cases(
		ok("a=b", "a=", "=b", "=", "a=b=c", "allowed_cluster_replica_sizes='25cc', 'm'"),
		refused("must have format KEY=VALUE", "", "novalue"),
	))
	checkCases(t, "KeyValueArg<HeaderName, HeaderValue>", func(s string) error {
		return parseKeyValueArg(s, parseHeaderName, parseHeaderValue)
	}, cases(
		ok("x-api-key=secret", "Authorization=Bearer abc", "k=", "k=v=w"),
		refused("must have format KEY=VALUE", "novalue"),
		refused("parsing key: invalid HTTP header name", "=v", "bad key=v", "k\"=v"),
		refused("parsing value: failed to parse header value", "k=a\nb"),
	))
	checkCases(t, "parse_key_val", parseKeyVal, cases(
		ok("a=b", "=", "a=b=c"),
		[]valueCase{{"ab", "invalid KEY=value: no `=` found in `ab`"}, {"", "invalid KEY=value: no `=` found in ``"}},
	))
}

func TestEnvironmentID(t *testing.T) {
	checkCases(t, "EnvironmentId", parseEnvironmentID, cases(
		ok("local-az1-9f00a1b2-0000-4000-8000-000000000001-0", "aws-us-east-1-9f00a1b2-0000-4000-8000-000000000001-12345678",
			"AWS-us-east-1-9f00a1b2-0000-4000-8000-000000000001-0", "generic-r-9f00a1b2-0000-4000-8000-000000000001-00"),
		refused("invalid environment ID",
			"9f00a1b2-0000-4000-8000-000000000001",                         // a bare UUID
			"mars-az1-9f00a1b2-0000-4000-8000-000000000001-0",              // unknown cloud
			"local-az1-9F00A1B2-0000-4000-8000-000000000001-0",             // upper-case UUID
			"local-az1-9f00a1b2-0000-4000-8000-000000000001-123456789",     // nine digits
			"local-az1-9f00a1b2-0000-4000-8000-000000000001-",              // no ordinal
			"local-az_1-9f00a1b2-0000-4000-8000-000000000001-0",            // '_' in the region
			"local-az1-9f00a1b2-0000-4000-8000-000000000001-\u0661",        // an Arabic-Indic digit
			"local-az1-9f00a1b2-0000-4000-8000-000000000001-0\n", "", "x"), // nothing after the ordinal
	))
}

const levelError = `error parsing level filter: expected one of "off", "error", "warn", "info", "debug", "trace", or a number 0-5`

// Not modelled: a field value that is not a bool or a number is a regular
// expression, and tracing-subscriber refuses an invalid one (say
// "foo[{x=(}]=info"); the stand-in accepts it.
func TestEnvFilter(t *testing.T) {
	checkCases(t, "EnvFilter", parseEnvFilter, cases(
		ok("info", "", "debug,mz_adapter=trace", "mz=info,warn", "INFO", "3", "foo=+3", "off", "target", "target=",
			"[span]=debug", "[span{field=value}]=trace", "foo[{x}]", "[{a=1}]", "a,,b", "target[span]", "é=info", "::=info",
			" info", "info ",
		),
		refused(levelError, "foo=bar", "foo=6", "foo=-1", "foo=debug ", "foo[{a}]=info=x]",
			"info, foo=debug"), // leading whitespace shifts upstream's slices: " fo" = "=debug"
		refused("invalid filter directive", "=info", "[span", "[span]x", "foo[{}]=info", "foo[{a=1,b=2}]=info",
			"foo[{a}x]", " ", "info,  ", "!foo", "[a]]", "+3"),
	))
	err := parseEnvFilter(" é=info")
	var p *panicError
	if !errors.As(err, &p) || p.msg != "byte index 2 is not a char boundary; it is inside 'é' (bytes 1..3) of ` é=info`" {
		t.Errorf("parseEnvFilter(\" é=info\") = %v, want upstream's panic", err)
	}
}

func TestURL(t *testing.T) {
	checkCases(t, "Url::parse", parseURL, cases(
		ok("postgres://mz@db/mz", "s3://bucket/path", "http://mzabc-persist-pubsub-1:6879", "file:///tmp/x", "file:/x",
			"postgres://user:pass@host:5432/db?sslmode=require", "postgres://root@db:26257?options=--search_path=consensus",
			"localhost:5432", "db:5432/x", "mem://", "foo:", "foo://", "foo://@", "http:example.com", "http:\\\\example.com",
			"http://1.2.3.4:80", "http://[::1]:80/", "http://0x7f.1/", "http://1./", "HTTP://EXAMPLE.COM", "postgres://%61/",
			"http://@host/", "http://exa_mple.com/", "http://a..b/", "http://例え.jp/", "http://h:/", "ws://h:65535",
			"http://[1:2:3:4:5:6:7::]/", "http://[::1.2.3.4]/", "http://[1:2:3:4:5:6:1.2.3.4]/", "  http://h/  ",
			"ht\ttp://h/", "file://localhost/x", "file://C:/x", "file://host/x", "postgres://h:5432\\x",
			"http://xn--bcher-kva.example/", "http://:@h/"),
		refused("relative URL without a base", "", "/tmp/x", "127.0.0.1:5432", "//host/x", "1http://h", "h_t://x"),
		refused("empty host", "http://", "http:///", "http:", "http://:80/", "postgres://:5432/db", "postgres://user@/db",
			"foo://@/x", "http://@/", "http://user@", "http://user@:80"),
		refused("invalid port number", "http://host:99999/", "http://host:80a/", "postgres://host:port/db", "ws://h:65536",
			"http://h:-1/"),
		refused("invalid IPv6 address", "http://[::1/", "http://[::g]/", "http://[1:2:3:4:5:6::7:8]/", "http://[::1.2.3.04]/",
			"http://[::1.2.3]/", "http://[1:2:3:4:5:6:7:1.2.3.4]/", "http://[]/", "http://[:1]/", "http://[1::2::3]/",
			"postgres://[::1/x"),
		refused("invalid IPv4 address", "http://1.2.3.256/", "http://1.2.3.4.5/", "http://foo.1/", "http://09/",
			"http://4294967296/", "http://1.2.3.0x100/"),
		refused("invalid international domain name", "http://exa mple.com/", "http://a%zz/", "http://a|b/", "http://xn--/",
			"http://xn--a-/", "file://host:80/x", "http://%C3/", "http://a%25b/", "http://a]b/", "http://\uFFFD/"),
		refused("invalid domain character", "postgres://a b/", "postgres://a^b/", "postgres://a[b/", "postgres://a\\b/",
			"postgres://a]b:1/"),
	))
}

func TestValueParsersOnTheCommandLine(t *testing.T) {
	args, lookup := goodEnvironmentd()
	for _, c := range []struct {
		arg  string
		kind ErrorKind
		want string
	}{
		{"--internal-persist-pubsub-listen-addr=localhost:6879", ValueValidation,
			"error: invalid value 'localhost:6879' for '--internal-persist-pubsub-listen-addr <HOST:PORT>': invalid socket address syntax"},
		{"--config-sync-loop-interval=1", ValueValidation,
			"error: invalid value '1' for '--config-sync-loop-interval <CONFIG_SYNC_LOOP_INTERVAL>': time unit needed, for example 1sec or 1ms"},
		{"--persist-consensus-url=not a url", ValueValidation,
			"error: invalid value '<redacted>' for '--persist-consensus-url <PERSIST_CONSENSUS_URL>'"},
		{"--environment-id=0b0b0b0b-1111-4222-8333-444444444444", ValueValidation,
			"error: invalid value '0b0b0b0b-1111-4222-8333-444444444444' for '--environment-id <<CLOUD>-<REGION>-<ORG-ID>-<ORDINAL>>': invalid environment ID"},
		{"--startup-log-filter=info,foo=verbose", ValueValidation,
			"error: invalid value 'info,foo=verbose' for '--startup-log-filter <FILTER>': " + levelError},
		{"--announce-egress-address=10.0.0.1", ValueValidation,
			"error: invalid value '10.0.0.1' for '--announce-egress-address <ANNOUNCE_EGRESS_ADDRESS>': invalid IP address syntax"},
		{"--frontegg-tenant=tenant", ValueValidation,
			"error: invalid value 'tenant' for '--frontegg-tenant <UUID>': invalid character: found `t` at 1"},
		{"--cors-allowed-origin=https://a\nb", ValueValidation,
			"error: invalid value 'https://a\nb' for '--cors-allowed-origin <CORS_ALLOWED_ORIGIN>': failed to parse header value"},
		{"--orchestrator-process-tcp-proxy-listen-addr=0.0.0.0:1", ValueValidation,
			"error: invalid value '0.0.0.0:1' for '--orchestrator-process-tcp-proxy-listen-addr <ORCHESTRATOR_PROCESS_TCP_PROXY_LISTEN_ADDR>': invalid IP address syntax"},
		{"--tokio-console-listen-addr=localhost:6669", ValueValidation,
			"error: invalid value 'localhost:6669' for '--tokio-console-listen-addr <TOKIO_CONSOLE_LISTEN_ADDR>': invalid internet socket address syntax"},
		// Delimited values are parsed one by one.
		{"--opentelemetry-header=x-a=1,x-b", ValueValidation,
			"error: invalid value 'x-b' for '--opentelemetry-header <NAME=VALUE>': must have format KEY=VALUE"},
		{"--aws-secrets-controller-tags=a=b;c", ValueValidation,
			"error: invalid value 'c' for '--aws-secrets-controller-tags <AWS_SECRETS_CONTROLLER_TAGS>': must have format KEY=VALUE"},
		{"--environment-id=\xff", InvalidUtf8, "error: invalid UTF-8 was detected in one or more arguments"},
		{"--aws-external-id-prefix=\xff", InvalidUtf8, "error: invalid UTF-8 was detected in one or more arguments"},
		{"--startup-log-filter= é=info", Panic,
			"thread 'main' panicked: byte index 2 is not a char boundary; it is inside 'é' (bytes 1..3) of ` é=info`"},
	} {
		parseErr(t, Environmentd, append(append([]string(nil), args...), c.arg), lookup, c.kind, c.want)
	}
	// The environment goes through the same parsers, SensitiveUrl redacting.
	bad := func(k, v string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			if name == k {
				return v, true
			}
			return lookup(name)
		}
	}
	parseErr(t, Environmentd, args, bad("MZ_PERSIST_BLOB_URL", "bucket/path"), ValueValidation,
		"error: invalid value '<redacted>' for '--persist-blob-url <PERSIST_BLOB_URL>'")
	parseErr(t, Environmentd, without(args, "--environment-id="), bad("MZ_ENVIRONMENT_ID", ""), ValueValidation,
		"error: invalid value '' for '--environment-id <<CLOUD>-<REGION>-<ORG-ID>-<ORDINAL>>': invalid environment ID")
	var e *Error
	if _, err := Parse(Environmentd, append(args, "--startup-log-filter= é=info"), lookup); !errors.As(err, &e) || e.ExitCode() != 101 {
		t.Errorf("a panicking value parser: %v, want exit 101", err)
	}
	if _, err := Parse(Environmentd, append(args, "--aws-external-id-prefix=anything at all",
		"--opentelemetry-endpoint=http://otel:4317", "--opentelemetry-header=x-a=1,x-b=2"), lookup); err != nil {
		t.Errorf("valid values refused: %v", err)
	}
	// balancerd's own parsers.
	svc := []string{"service", "--pgwire-listen-addr=0.0.0.0:6875", "--https-listen-addr=0.0.0.0:6876",
		"--internal-http-listen-addr=0.0.0.0:8080", "--static-resolver-addr=x:6875", "--https-resolver-template=x:6876"}
	parseErr(t, Balancerd, append(svc, "--default-config=novalue"), nil, ValueValidation,
		"error: invalid value 'novalue' for '--default-config <DEFAULT_CONFIG>': invalid KEY=value: no `=` found in `novalue`")
	parseErr(t, Balancerd, append(svc, "--static-resolver-addr-timeout=soon"), nil, ValueValidation,
		"error: invalid value 'soon' for '--static-resolver-addr-timeout <STATIC_RESOLVER_ADDR_TIMEOUT>': expected number at 0")
	parseErr(t, Balancerd, []string{"service", "--pgwire-listen-addr=localhost:6875"}, nil, ValueValidation,
		"error: invalid value 'localhost:6875' for '--pgwire-listen-addr <HOST:PORT>': invalid socket address syntax")
}

// Every value parser of the tables is modelled: a new Rust type shows up
// here as Unchecked (model it in values.go and the generator's
// valueparsers.go).
func TestNoUncheckedValueParsers(t *testing.T) {
	var walk func(cmd *Command)
	walk = func(cmd *Command) {
		for _, a := range cmd.Args {
			if a.Parser.Kind == Unchecked {
				t.Errorf("%s --%s: %s (%s) is not modelled", cmd.Name, a.Long, a.Parser.Expr, a.RustType)
			}
			// Every default parses (clap parses defaults too).
			for _, d := range a.Default {
				if err := checkValue(a, d); err != nil {
					t.Errorf("%s --%s: default %q: %v", cmd.Name, a.Long, d, err)
				}
			}
		}
		for _, sc := range cmd.Subcommands {
			walk(sc)
		}
	}
	walk(Environmentd)
	walk(Balancerd)
	walk(Clusterd)
}

package clap

import (
	"fmt"
	"reflect"
	"testing"
)

// Every release line of a generated table is a valid clap command: unique
// ids and names (clap's debug assertions), references to arguments of the
// same line, and Since/Until naming the table's lines in order.
func TestEveryReleaseLineIsACommand(t *testing.T) {
	for _, cmd := range []*Command{Environmentd, Balancerd} {
		if len(cmd.Versions) < 2 {
			t.Fatalf("%s: Versions = %q, want the release lines from 26.1", cmd.Name, cmd.Versions)
		}
		if cmd.Versions[0] != "26.1" {
			t.Errorf("%s: oldest release line %s, want 26.1", cmd.Name, cmd.Versions[0])
		}
		for i := 1; i < len(cmd.Versions); i++ {
			a0, b0 := parseLine(cmd.Versions[i-1])
			a1, b1 := parseLine(cmd.Versions[i])
			if a1 < a0 || (a1 == a0 && b1 <= b0) {
				t.Errorf("%s: Versions out of order at %s", cmd.Name, cmd.Versions[i])
			}
		}
		var walk func(c *Command)
		walk = func(c *Command) {
			for _, a := range c.Args {
				lo, hi := 0, len(cmd.Versions)-1
				if a.Since != "" {
					lo = indexOf(cmd.Versions, a.Since)
				}
				if a.Until != "" {
					hi = indexOf(cmd.Versions, a.Until)
				}
				if lo > hi || (a.Since != "" && lo == 0) || (a.Until != "" && hi == len(cmd.Versions)-1) {
					t.Errorf("%s: %s: Since %q Until %q", cmd.Name, a.ID, a.Since, a.Until)
				}
			}
			for _, sc := range c.Subcommands {
				walk(sc)
			}
		}
		walk(cmd)
		for _, line := range cmd.Versions {
			major, minor := parseLine(line)
			at := cmd.At(major, minor)
			if at.Line() != line {
				t.Errorf("%s.At(%s).Line() = %q", cmd.Name, line, at.Line())
			}
			if err := validCommand(at); err != nil {
				t.Errorf("%s at %s: %v", cmd.Name, line, err)
			}
		}
	}
}

func validCommand(c *Command) error {
	ids, names := map[string]bool{}, map[string]bool{}
	for _, a := range c.Args {
		if ids[a.ID] {
			return fmt.Errorf("%s: argument id %q twice", c.Name, a.ID)
		}
		ids[a.ID] = true
		for _, n := range append([]string{a.Long}, a.Aliases...) {
			if n != "" && names[n] {
				return fmt.Errorf("%s: --%s twice", c.Name, n)
			}
			names[n] = true
		}
	}
	for _, a := range c.Args {
		for _, r := range append(append(append([]string{}, a.Requires...), a.ConflictsWith...), a.RequiredUnlessPresent...) {
			if !ids[r] {
				return fmt.Errorf("%s: %s refers to %q, which this release lacks", c.Name, a.ID, r)
			}
		}
		for _, cond := range append(append([]Cond{}, a.RequiredIfEq...), a.RequiredIfEqAll...) {
			if !ids[cond.Arg] {
				return fmt.Errorf("%s: %s refers to %q, which this release lacks", c.Name, a.ID, cond.Arg)
			}
		}
	}
	for _, sc := range c.Subcommands {
		if err := validCommand(sc); err != nil {
			return err
		}
	}
	return nil
}

// A flag is refused, in clap's words, by a release older than the one that
// added it, and accepted from that release on; its environment variable is
// not read where the flag does not exist.
func TestAFlagNewerThanTheReleaseIsRefused(t *testing.T) {
	args, lookup := goodEnvironmentd()
	flag := "--launchdarkly-base-uri=https://ld.example.com"
	if a := Lookup(Environmentd, "launchdarkly-base-uri"); a == nil || a.Since != "26.33" || a.Until != "" {
		t.Fatalf("--launchdarkly-base-uri = %+v, want Since 26.33 (upstream added it then)", a)
	}
	for _, line := range []struct{ major, minor uint64 }{{26, 1}, {26, 5}, {26, 32}} {
		parseErr(t, Environmentd.At(line.major, line.minor), append(args, flag), lookup,
			UnknownArgument, "error: unexpected argument '--launchdarkly-base-uri' found")
	}
	for _, line := range []struct{ major, minor uint64 }{{26, 33}, {26, 35}, {26, 40}, {27, 0}} {
		m, err := Parse(Environmentd.At(line.major, line.minor), append(args, flag), lookup)
		if err != nil {
			t.Fatalf("%d.%d refuses %s: %v", line.major, line.minor, flag, err)
		}
		if got, _ := m.Get("launchdarkly-base-uri"); got != "https://ld.example.com" {
			t.Errorf("%d.%d: --launchdarkly-base-uri = %q", line.major, line.minor, got)
		}
	}
	// Where the flag does not exist its environment variable is not read,
	// as clap ignores any variable no argument names.
	withEnv := func(k string) (string, bool) {
		if k == "MZ_LAUNCHDARKLY_BASE_URI" {
			return "https://ld.example.com", true
		}
		return lookup(k)
	}
	m, err := Parse(Environmentd.At(26, 32), args, withEnv)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get("launchdarkly-base-uri"); ok {
		t.Errorf("26.32 read MZ_LAUNCHDARKLY_BASE_URI")
	}
	m, err = Parse(Environmentd.At(26, 33), args, withEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Get("launchdarkly-base-uri"); got != "https://ld.example.com" || m.Sources["launchdarkly-base-uri"] != FromEnv {
		t.Errorf("26.33: --launchdarkly-base-uri = %q from %v, want MZ_LAUNCHDARKLY_BASE_URI's", got, m.Sources["launchdarkly-base-uri"])
	}
}

// A flag upstream removed is refused after its last release, and so by the
// table parsed without At (the newest line).
func TestARemovedFlagIsRefusedAfterItsLastRelease(t *testing.T) {
	args, lookup := goodEnvironmentd()
	flag := "--oidc-issuer=https://issuer.example.com"
	a := Environmentd.At(26, 12)
	if x := Lookup(a, "oidc-issuer"); x == nil || x.Since != "26.12" || x.Until != "26.13" {
		t.Fatalf("--oidc-issuer at 26.12 = %+v, want Since 26.12 Until 26.13", x)
	}
	for _, line := range []struct{ major, minor uint64 }{{26, 12}, {26, 13}} {
		if _, err := Parse(Environmentd.At(line.major, line.minor), append(args, flag), lookup); err != nil {
			t.Errorf("%d.%d refuses %s: %v", line.major, line.minor, flag, err)
		}
	}
	for _, cmd := range []*Command{Environmentd.At(26, 11), Environmentd.At(26, 14), Environmentd.At(26, 40), Environmentd} {
		parseErr(t, cmd, append(args, flag), lookup, UnknownArgument, "error: unexpected argument '--oidc-issuer' found")
	}
	if Lookup(Environmentd, "oidc-issuer") != nil {
		t.Errorf("Lookup finds --oidc-issuer in the newest line")
	}
}

// At on a table made by hand: the nearest older line, the oldest below it,
// the newest above it; subcommands and arguments with several definitions.
func TestAtPicksTheNearestOlderLine(t *testing.T) {
	cmd := &Command{
		Name:     "prog",
		Versions: []string{"26.1", "26.3", "26.10"},
		Args: []*Arg{
			{ID: "old", Long: "old", Action: SetTrue, Until: "26.1"},
			{ID: "mode", Long: "mode", Action: Set, Parser: Parser{Kind: Enum, Values: []PossibleValue{{Name: "a"}}}, Until: "26.3"},
			{ID: "mode", Long: "mode", Action: Set, Parser: Parser{Kind: Enum, Values: []PossibleValue{{Name: "a"}, {Name: "b"}}}, Since: "26.10"},
			{ID: "new", Long: "new", Action: SetTrue, Since: "26.3"},
		},
		Subcommands: []*Command{
			{Name: "serve", Since: "26.10", Args: []*Arg{{ID: "port", Long: "port", Action: Set}}},
		},
	}
	ids := func(c *Command) []string {
		var out []string
		for _, a := range c.Args {
			out = append(out, a.ID)
		}
		for _, sc := range c.Subcommands {
			out = append(out, "sub:"+sc.Name)
		}
		return out
	}
	for _, c := range []struct {
		major, minor uint64
		line         string
		ids          []string
	}{
		{0, 147, "26.1", []string{"old", "mode"}},
		{26, 1, "26.1", []string{"old", "mode"}},
		{26, 2, "26.1", []string{"old", "mode"}},
		{26, 3, "26.3", []string{"mode", "new"}},
		{26, 9, "26.3", []string{"mode", "new"}},
		{26, 10, "26.10", []string{"mode", "new", "sub:serve"}},
		{27, 0, "26.10", []string{"mode", "new", "sub:serve"}},
	} {
		at := cmd.At(c.major, c.minor)
		if at.Line() != c.line || !reflect.DeepEqual(ids(at), c.ids) {
			t.Errorf("At(%d.%d) = line %q %q, want %q %q", c.major, c.minor, at.Line(), ids(at), c.line, c.ids)
		}
	}
	parseErr(t, cmd.At(26, 3), []string{"--mode=b"}, nil, InvalidValue, "error: invalid value 'b' for '--mode <mode>'\n  [possible values: a]")
	if _, err := Parse(cmd, []string{"--mode=b", "serve", "--port=1"}, nil); err != nil {
		t.Errorf("the newest line: %v", err)
	}
	parseErr(t, cmd.At(26, 3), []string{"serve"}, nil, UnknownArgument, "error: unexpected argument 'serve' found")
	parseErr(t, cmd.At(26, 3), []string{"--old"}, nil, UnknownArgument, "error: unexpected argument '--old' found")
	// A table of one version is every version's.
	one := &Command{Name: "one", Args: []*Arg{{ID: "x", Long: "x", Action: SetTrue}}}
	if one.At(26, 1) != one || one.Line() != "" {
		t.Errorf("a table without Versions changed under At")
	}
}

package main

// The generator's model of a command line. It mirrors the types of package
// test/standin/clap (which the emitted code uses) but does not import that
// package, so that a stale or broken generated file there never stops the
// generator from building.

type Command struct {
	Name                string
	Args                []*Arg
	Subcommands         []*Command
	SubcommandRequired  bool
	ArgRequiredElseHelp bool
	Version             bool
	ArgsOverrideSelf    bool
	Origin              string
	Versions            []string
	Since, Until        string
}

type Action int

const (
	Set Action = iota
	Append
	SetTrue
	SetFalse
)

type Arg struct {
	ID                       string
	Long                     string
	Short                    rune
	Aliases                  []string
	Env                      string
	Action                   Action
	ValueName                string
	Delimiter                rune
	Required                 bool
	Hidden                   bool
	Default                  []string
	DefaultIf                []DefaultIf
	RequiredIfEq             []Cond
	RequiredIfEqAll          []Cond
	RequiredUnlessPresent    []string
	RequiredUnlessPresentAll []string
	Requires                 []string
	ConflictsWith            []string
	Parser                   Parser
	RustType                 string
	Origin                   string
	Since, Until             string
}

type Cond struct {
	Arg   string
	Value string
}

type DefaultIf struct {
	Arg     string
	Present bool
	Equals  string
	Value   string
	NoValue bool
}

type ParserKind int

const (
	String ParserKind = iota
	Path
	Bool
	Int
	Enum
	Unchecked
	Duration
	SocketAddr
	NetioSocketAddr
	IPAddr
	IPNet
	UUID
	HeaderValue
	KeyValueArg
	HeaderKeyValueArg
	KeyValPair
	URL
	EnvFilter
	EnvironmentID
	Text
	TimelyConfig
)

type Parser struct {
	Kind   ParserKind
	Values []PossibleValue
	Int    *IntRange
	Expr   string
}

type PossibleValue struct {
	Name    string
	Aliases []string
	Hidden  bool
}

type IntRange struct {
	Unsigned bool
	Bounded  bool
	Min, Max string
}

// lookup returns the argument with the given long name.
func lookup(cmd *Command, long string) *Arg {
	for _, a := range cmd.Args {
		if a.Long == long {
			return a
		}
	}
	return nil
}

package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goFiles calls visit with every Go file of the repository (tests, and
// files behind build tags, included), outside caches and build output.
func goFiles(t *testing.T, visit func(path string, src []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "target" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		visit(path, src)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var (
	testFuncRE = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Z0-9_][A-Za-z0-9_]*)\(`)
	testNameRE = regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)`)
)

// Every Go test, benchmark or fuzz target a page names (in a code span or a
// command; in a -run pattern, the start of one) is one the repository has:
// a renamed test leaves the docs pointing at nothing, and a user running
// `go test -run` gets "no tests to run".
func TestTestNamesExist(t *testing.T) {
	defined := map[string]bool{}
	goFiles(t, func(path string, src []byte) {
		if !strings.HasSuffix(path, "_test.go") {
			return
		}
		for _, m := range testFuncRE.FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
	})
	if len(defined) < 100 {
		t.Fatalf("found %d test functions: the pattern no longer matches the sources", len(defined))
	}
	names := slices.Collect(maps.Keys(defined))
	checked := 0
	for _, pg := range pages(t) {
		for _, l := range append(append([]located{}, pg.spans...), pg.blocks...) {
			for _, m := range testNameRE.FindAllStringSubmatch(l.text, -1) {
				checked++
				// In a -run or -bench pattern a name may be a prefix.
				if !defined[m[1]] && !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, m[1]) }) {
					t.Errorf("%s: %s: no such test, benchmark or fuzz target", pg.where(l), m[1])
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no test named in the docs: the pattern no longer matches them")
	}
}

// identifierRE is a code span naming an exported Go identifier of a
// package: `pkg.Name`, or `pkg.Type.Member`.
var identifierRE = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?$`)

// Every `pkg.Name` (or `pkg.Type.Member`) a page names, where pkg is the
// name of one of the repository's packages, is declared there: a function,
// type, variable or constant, and the member a method or field of it.
// Names of other modules' packages (metav1.Condition) are not checked.
func TestGoIdentifiersExist(t *testing.T) {
	type declared struct{ names, members map[string]bool }
	packages := map[string]*declared{}
	fset := token.NewFileSet()
	goFiles(t, func(path string, src []byte) {
		if strings.HasSuffix(path, "_test.go") {
			return
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		d := packages[f.Name.Name]
		if d == nil {
			d = &declared{names: map[string]bool{}, members: map[string]bool{}}
			packages[f.Name.Name] = d
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv != nil {
					d.members[decl.Name.Name] = true
				} else {
					d.names[decl.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						d.names[spec.Name.Name] = true
						ast.Inspect(spec.Type, func(n ast.Node) bool {
							if field, ok := n.(*ast.Field); ok {
								for _, name := range field.Names {
									d.members[name.Name] = true
								}
							}
							return true
						})
					case *ast.ValueSpec:
						for _, name := range spec.Names {
							d.names[name.Name] = true
						}
					}
				}
			}
		}
	})
	checked := 0
	for _, pg := range pages(t) {
		for _, l := range pg.spans {
			m := identifierRE.FindStringSubmatch(l.text)
			if m == nil || packages[m[1]] == nil {
				continue
			}
			checked++
			d := packages[m[1]]
			if !d.names[m[2]] {
				t.Errorf("%s: `%s`: package %s declares no %s", pg.where(l), l.text, m[1], m[2])
			} else if m[3] != "" && !d.members[m[3]] {
				t.Errorf("%s: `%s`: package %s has no method or field %s", pg.where(l), l.text, m[1], m[3])
			}
		}
	}
	if checked == 0 {
		t.Fatal("no Go identifier named in the docs: the pattern no longer matches them")
	}
}

// Every log line the failure table of operations.md quotes (its logs
// column) is one the programs write: each part of it, around an elided
// "...", is in a string literal of cmd/ or pkg/. Someone grepping the logs
// for the documented words finds them.
func TestQuotedLogLinesExist(t *testing.T) {
	var literals []string
	for _, dir := range []string{"cmd", "pkg"} {
		literals = append(literals, goStringLiterals(t, dir)...)
	}
	raw, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	column, checked := -1, 0
	for n, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "|") {
			column = -1
			continue
		}
		cells := strings.Split(line, "|")
		if column < 0 {
			column = slices.IndexFunc(cells, func(c string) bool { return strings.HasPrefix(strings.TrimSpace(c), "logs") })
			continue
		}
		if column >= len(cells) {
			continue
		}
		for _, m := range spanRE.FindAllStringSubmatch(cells[column], -1) {
			for _, part := range strings.FieldsFunc(strings.ReplaceAll(m[1], "...", "…"), func(r rune) bool { return r == '…' }) {
				part = strings.TrimSpace(part)
				if part == "" {
					continue
				}
				checked++
				if !slices.ContainsFunc(literals, func(s string) bool { return strings.Contains(s, part) }) {
					t.Errorf("docs/operations.md:%d: log line %q: no string literal in cmd/ or pkg/ has it", n+1, part)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("%d log lines checked: the table's logs column was not found", checked)
	}
}

// Package docs checks that what the documentation names exists: make
// targets, repository paths and links, the programs' flags, Helm values,
// metric names and CRD fields. A user follows the docs literally; a name
// that no longer exists is a bug in the docs (or a removal the docs missed).
package docs

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	controllers "github.com/materializeinc/orchestratord/pkg/controllers/app"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize/rollout"
	"github.com/materializeinc/orchestratord/pkg/crds"
	webhook "github.com/materializeinc/orchestratord/pkg/webhook/app"
	"github.com/materializeinc/orchestratord/test/standin/clap"
)

const root = "../.."

// page is one Markdown file: its prose code spans (outside fenced blocks)
// and its fenced blocks' lines, each with its line number.
type page struct {
	path   string
	spans  []located
	blocks []located
	links  []located
}

type located struct {
	text string
	line int
}

var (
	spanRE = regexp.MustCompile("`([^`]+)`")
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

func pages(t *testing.T) []page {
	t.Helper()
	var paths []string
	for _, dir := range []string{"docs", "charts/orchestratord"} {
		matches, err := filepath.Glob(filepath.Join(root, dir, "*.md"))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, matches...)
	}
	paths = append(paths, filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md"))
	var out []page
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pg := page{path: p}
		fenced := false
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				pg.blocks = append(pg.blocks, located{line, n})
				continue
			}
			for _, m := range spanRE.FindAllStringSubmatch(line, -1) {
				pg.spans = append(pg.spans, located{m[1], n})
			}
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				pg.links = append(pg.links, located{m[1], n})
			}
		}
		out = append(out, pg)
	}
	return out
}

func (p page) where(l located) string {
	rel, _ := filepath.Rel(root, p.path)
	return rel + ":" + strconv.Itoa(l.line)
}

// Every `make TARGET` a page names is a target of the Makefile.
func TestMakeTargetsExist(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(raw), -1) {
		targets[m[1]] = true
	}
	use := regexp.MustCompile(`(?:^|[\s` + "`" + `(])make ([a-z][a-z0-9-]*)`)
	for _, pg := range pages(t) {
		for _, l := range append(append([]located{}, pg.spans...), pg.blocks...) {
			for _, m := range use.FindAllStringSubmatch(l.text, -1) {
				if !targets[m[1]] {
					t.Errorf("%s: `make %s`: no such Makefile target", pg.where(l), m[1])
				}
			}
		}
	}
}

var repoPathRE = regexp.MustCompile(`^(?:\./)?(?:cmd|pkg|charts|deploy|hack|test|docs|\.ci)/[A-Za-z0-9_./-]*$|^[A-Za-z0-9_-]+\.md$`)

// Every repository path a page names in a code span, and every relative
// link, exists.
func TestPathsExist(t *testing.T) {
	for _, pg := range pages(t) {
		for _, l := range pg.spans {
			p := strings.TrimSuffix(l.text, "/")
			if !repoPathRE.MatchString(l.text) {
				continue
			}
			candidates := []string{filepath.Join(root, p), filepath.Join(filepath.Dir(pg.path), p), filepath.Join(root, "docs", p)}
			if !anyExists(candidates) {
				t.Errorf("%s: `%s`: no such file or directory", pg.where(l), l.text)
			}
		}
		for _, l := range pg.links {
			target := l.text
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if !anyExists([]string{filepath.Join(filepath.Dir(pg.path), target)}) {
				t.Errorf("%s: link %q: no such file", pg.where(l), l.text)
			}
		}
	}
}

func anyExists(paths []string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// foreignFlags are flags the docs name that belong to other programs than
// the two here and Materialize's (whose flags come from the stand-ins'
// tables, generated from upstream's sources), each with whose it is.
var foreignFlags = map[string]string{
	"all":                     "helm get values",
	"build-arg":               "docker build",
	"force-conflicts":         "helm install (Helm 4)",
	"grace-period":            "kubectl delete",
	"reset-then-reuse-values": "helm upgrade",
	"reuse-values":            "helm upgrade",
	"set":                     "helm",
	"set-json":                "helm",
	"set-string":              "helm",
	"tracing-config-file":     "kube-apiserver",
	"sql-listen-addr":         "environmentd before 26",
}

// upstreamFlags are the long names (and aliases) of environmentd's,
// clusterd's and balancerd's arguments in every release line the stand-ins
// know.
func upstreamFlags() map[string]bool {
	out := map[string]bool{}
	var walk func(c *clap.Command)
	walk = func(c *clap.Command) {
		for _, a := range c.Args {
			if a.Long != "" {
				out[a.Long] = true
			}
			for _, alias := range a.Aliases {
				out[alias] = true
			}
		}
		for _, sub := range c.Subcommands {
			walk(sub)
		}
	}
	for _, c := range []*clap.Command{clap.Environmentd, clap.Clusterd, clap.Balancerd} {
		walk(c)
	}
	return out
}

// Every program flag a page names in a code span (`--name` or
// `--name=value`) is a flag of cmd/webhook or cmd/controllers, of
// environmentd, clusterd or balancerd, or a known flag of another program.
func TestFlagsExist(t *testing.T) {
	known := upstreamFlags()
	programs := []*cobra.Command{webhook.NewCommand(), controllers.NewCommand()}
	// Lookup normalizes: upstream orchestratord's names that the programs
	// take as aliases or refuse count as theirs.
	ours := func(name string) bool {
		if known[name] {
			return true
		}
		for _, cmd := range programs {
			if cmd.Flags().Lookup(name) != nil || cmd.PersistentFlags().Lookup(name) != nil {
				return true
			}
		}
		return false
	}
	flagRE := regexp.MustCompile(`^--([a-z0-9][a-z0-9-]*)(?:[= ].*)?$`)
	for _, pg := range pages(t) {
		for _, l := range pg.spans {
			m := flagRE.FindStringSubmatch(l.text)
			if m == nil || ours(m[1]) || foreignFlags[m[1]] != "" {
				continue
			}
			t.Errorf("%s: `%s`: neither program has this flag", pg.where(l), l.text)
		}
	}
}

// valuesPath reports whether a dotted path (a trailing ".*" for a subtree)
// names a key of values.yaml; a map the chart leaves open (empty by
// default: selectors, annotations, sizes) takes any key below it.
func valuesPath(values map[string]any, path string) bool {
	var cur any = values
	for _, seg := range strings.Split(strings.TrimSuffix(path, ".*"), ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if len(m) == 0 {
			return true
		}
		if cur, ok = m[seg]; !ok {
			return false
		}
	}
	return true
}

// Every Helm value a page names (a dotted path under one of values.yaml's
// top-level keys, optionally `=value`) exists in values.yaml.
func TestHelmValuesExist(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "charts/orchestratord/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	valueRE := regexp.MustCompile(`^([a-z][A-Za-z0-9]*)((?:\.[A-Za-z0-9_-]+)+)(\.\*)?(?:=.*)?$`)
	for _, pg := range pages(t) {
		if strings.HasSuffix(pg.path, "migrating-from-orchestratord.md") {
			continue // names upstream's values too; its own test runs its commands
		}
		for _, l := range pg.spans {
			m := valueRE.FindStringSubmatch(l.text)
			if m == nil {
				continue
			}
			// Values are camelCase; a capitalised segment is a Go name.
			if _, top := values[m[1]]; !top || strings.HasSuffix(m[2], ".yaml") || strings.HasSuffix(m[2], ".md") ||
				regexp.MustCompile(`\.[A-Z]`).MatchString(m[2]) {
				continue
			}
			if !valuesPath(values, m[1]+m[2]) {
				t.Errorf("%s: `%s`: no such value in values.yaml", pg.where(l), l.text)
			}
		}
	}
}

// metricNames are the names of the metrics the programs define: every
// Opts literal's Namespace_Subsystem_Name and every string literal that is
// a whole orchestratord_ metric name (NewDesc, plain Name fields).
func metricNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	inspectGoSources(t, "pkg", func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			parts := map[string]string{}
			for _, el := range n.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, ok1 := kv.Key.(*ast.Ident)
				lit, ok2 := kv.Value.(*ast.BasicLit)
				if ok1 && ok2 && lit.Kind == token.STRING {
					parts[key.Name], _ = strconv.Unquote(lit.Value)
				}
			}
			if parts["Name"] != "" {
				var full []string
				for _, k := range []string{"Namespace", "Subsystem", "Name"} {
					if parts[k] != "" {
						full = append(full, parts[k])
					}
				}
				names[strings.Join(full, "_")] = true
			}
		case *ast.BasicLit:
			if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && regexp.MustCompile(`^(orchestratord|environmentd)_[a-z_]+$`).MatchString(s) {
				names[s] = true
			}
		}
		return true
	})
	return names
}

// Every orchestratord_ metric a page names is one the programs define (a
// histogram's _bucket, _sum and _count series included).
func TestMetricsExist(t *testing.T) {
	names := metricNames(t)
	if !names["orchestratord_webhook_conversions_total"] || !names["orchestratord_leader_election_is_leader"] {
		t.Fatalf("the metric names were not found in the source: %v", names)
	}
	use := regexp.MustCompile(`\borchestratord_[a-z_]+[a-z]|\benvironmentd_needs_update\b`)
	for _, pg := range pages(t) {
		for _, l := range append(append([]located{}, pg.spans...), pg.blocks...) {
			for _, name := range use.FindAllString(l.text, -1) {
				base := name
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if !names[base] {
						base = strings.TrimSuffix(base, suffix)
					}
				}
				if !names[base] {
					t.Errorf("%s: metric %s: no such metric", pg.where(l), name)
				}
			}
		}
	}
}

// schemaPath reports whether a dotted path below spec or status exists in
// some version of some CRD (a field of a list's items counts).
func schemaPath(defs []*apiextensionsv1.CustomResourceDefinition, path string) bool {
	for _, crd := range defs {
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			s := v.Schema.OpenAPIV3Schema
			found := true
			for _, seg := range strings.Split(path, ".") {
				for s.Items != nil && s.Items.Schema != nil {
					s = s.Items.Schema
				}
				if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
					break
				}
				if s.AdditionalProperties != nil {
					if s.AdditionalProperties.Schema == nil {
						break
					}
					next := *s.AdditionalProperties.Schema
					s = &next
					continue
				}
				next, ok := s.Properties[seg]
				if !ok {
					found = false
					break
				}
				s = &next
			}
			if found {
				return true
			}
		}
	}
	return false
}

// foreignFields are spec and status fields the docs name of other kinds.
var foreignFields = map[string]string{
	"spec.unschedulable": "Node",
}

// Every spec. or status. field a page names exists in the CRDs.
func TestCRDFieldsExist(t *testing.T) {
	defs, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	fieldRE := regexp.MustCompile(`^((?:spec|status)(?:\.[A-Za-z][A-Za-z0-9]*)+)(?:[=:].*)?$`)
	var missing []string
	for _, pg := range pages(t) {
		if strings.HasSuffix(pg.path, "migrating-from-orchestratord.md") {
			continue
		}
		for _, l := range pg.spans {
			m := fieldRE.FindStringSubmatch(l.text)
			if m == nil || schemaPath(defs, m[1]) || foreignFields[m[1]] != "" {
				continue
			}
			missing = append(missing, pg.where(l)+": `"+l.text+"`")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s: no such field in the CRDs", m)
	}
}

// The migration page's commands that hand the CRDs over to Helm (label,
// annotate) and check them before an uninstall name every CRD the chart
// installs: one left out fails `helm install` ("invalid ownership
// metadata") or is lost by an uninstall nobody checked.
func TestMigrationCommandsNameEveryCRD(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "charts/orchestratord/files/crds/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var installed []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatal(err)
		}
		installed = append(installed, crd.Name)
	}
	sort.Strings(installed)
	if len(installed) < 4 {
		t.Fatalf("the chart's CRDs: %v", installed)
	}
	var migration page
	for _, pg := range pages(t) {
		if strings.HasSuffix(pg.path, "migrating-from-orchestratord.md") {
			migration = pg
		}
	}
	crdRE := regexp.MustCompile(`[a-z]+\.materialize\.cloud`)
	seen := 0
	for _, l := range migration.blocks {
		cmd := strings.TrimSpace(l.text)
		if !strings.HasPrefix(cmd, "kubectl label crd ") && !strings.HasPrefix(cmd, "kubectl annotate crd ") &&
			!(strings.HasPrefix(cmd, "kubectl get crd ") && strings.Contains(cmd, "resource-policy")) {
			continue
		}
		seen++
		named := crdRE.FindAllString(cmd, -1)
		sort.Strings(named)
		if strings.Join(named, " ") != strings.Join(installed, " ") {
			t.Errorf("%s: names %v, the chart installs %v", migration.where(l), named, installed)
		}
	}
	if seen < 3 {
		t.Errorf("found %d of the label, annotate and check commands in the migration page", seen)
	}
}

// The number of alerts monitoring.md gives is the number the shipped rules
// hold, and every alert the rules hold has a section there.
func TestMonitoringNamesEveryAlert(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "charts/orchestratord/files/monitoring/alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(raw), -1)
	doc, err := os.ReadFile(filepath.Join(root, "docs/monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(\d+) alerts`).FindStringSubmatch(string(doc))
	if m == nil || m[1] != strconv.Itoa(len(alerts)) {
		t.Errorf("docs/monitoring.md counts %v alerts, the rules hold %d", m, len(alerts))
	}
	for _, a := range alerts {
		if !strings.Contains(string(doc), a[1]) {
			t.Errorf("alert %s has no section in docs/monitoring.md", a[1])
		}
	}
}

// The stuck-rollout runbook (operations.md) says what every reason of the
// UpToDate condition means and what to do.
func TestRunbookCoversEveryRolloutReason(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "## A rollout that does not finish")
	if start < 0 {
		t.Fatal(`docs/operations.md has no "A rollout that does not finish" section`)
	}
	section := doc[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	for _, reason := range []string{rollout.ReasonApplied, rollout.ReasonApplying, rollout.ReasonReadyToPromote,
		rollout.ReasonPromoting, rollout.ReasonWaitingForApproval, rollout.ReasonFailedDeploy, rollout.ReasonRolloutTimeout} {
		if !strings.Contains(section, "| `"+reason+"` (") {
			t.Errorf("the runbook has no row for UpToDate reason %s", reason)
		}
	}
}

// conditionMessageRE is a quoted condition message a doc gives for a
// generation: "Applying changes for generation N: …".
var conditionMessageRE = regexp.MustCompile(`"([A-Z][^"]*?)generation N`)

// goStringLiterals are the string literals of the Go sources under dir.
func goStringLiterals(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	inspectGoSources(t, dir, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				out = append(out, s)
			}
		}
		return true
	})
	return out
}

// A condition message a doc quotes for a generation is one the controllers
// write: its words before "generation N" and the generation's number.
func TestConditionMessagesExist(t *testing.T) {
	literals := goStringLiterals(t, "pkg/controllers")
	checked := 0
	for _, pg := range pages(t) {
		raw, err := os.ReadFile(pg.path)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(raw), "\n") {
			for _, m := range conditionMessageRE.FindAllStringSubmatch(line, -1) {
				checked++
				want := m[1] + "generation %d"
				if !slices.ContainsFunc(literals, func(s string) bool { return strings.Contains(s, want) }) {
					rel, _ := filepath.Rel(root, pg.path)
					t.Errorf("%s:%d: no condition message %q in pkg/controllers", rel, n+1, m[1]+"generation N")
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no quoted condition message found: the pattern no longer matches the docs")
	}
}

// reasonRE is a backticked CamelCase word on a line about a reason: one
// that says "reason" (not "no reason") next to a condition or an Event.
var (
	reasonRE       = regexp.MustCompile("^[A-Z][a-z]+(?:[A-Z][a-z]+)+$")
	wordRE         = regexp.MustCompile("^[A-Z][A-Za-z]+$")
	statusReasonRE = regexp.MustCompile("^(?:UpToDate=)?(?:True|False|Unknown)/([A-Z][A-Za-z]+)$")
	aboutReasons   = regexp.MustCompile(`(?i)(?:\breasons?\b.*\b(?:condition|event|uptodate|ready|licensekey)|\b(?:condition|event|uptodate|ready|licensekey)s?\b.*\breasons?\b)`)
)

// reasonsInCode are the reasons the code writes: the values of constants
// named Reason* (and Condition*: the condition types a reason is written
// next to), and the string literal reasons of Event and Eventf calls.
func reasonsInCode(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	literal := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				known[s] = true
			}
		}
	}
	inspectGoSources(t, "pkg", func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if (strings.HasPrefix(name.Name, "Reason") || strings.HasPrefix(name.Name, "Condition")) && i < len(n.Values) {
					literal(n.Values[i])
				}
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Event" || sel.Sel.Name == "Eventf") && len(n.Args) >= 3 {
				literal(n.Args[2])
			}
		}
		return true
	})
	return known
}

// A condition or Event reason a doc names (a CamelCase code span on a line
// that says "reason" next to a condition or an Event, a `Status/Reason`
// span, or a runbook row "`Reason` (Status)") is one the code writes
// (reasonsInCode).
func TestReasonsExist(t *testing.T) {
	known := reasonsInCode(t)
	checked := 0
	for _, pg := range pages(t) {
		raw, err := os.ReadFile(pg.path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		for _, span := range pg.spans {
			name, line := span.text, lines[span.line-1]
			if m := statusReasonRE.FindStringSubmatch(name); m != nil {
				name = m[1] // `False/WaitingForApproval`
			} else if !(reasonRE.MatchString(name) && aboutReasons.MatchString(line)) &&
				!(wordRE.MatchString(name) && (strings.Contains(line, "`"+name+"` (Unknown)") ||
					strings.Contains(line, "`"+name+"` (True)") || strings.Contains(line, "`"+name+"` (False)"))) {
				continue
			}
			checked++
			if !known[name] {
				t.Errorf("%s: reason %s is not a string the code writes", pg.where(span), name)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("%d reasons found in the docs: the pattern no longer matches them", checked)
	}
	t.Logf("%d reasons named in the docs, each one the code writes", checked)
}

// inspectGoSources calls inspect on every node of the non-test Go files
// under dir (ast.Inspect).
func inspectGoSources(t *testing.T, dir string, inspect func(ast.Node) bool) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, inspect)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

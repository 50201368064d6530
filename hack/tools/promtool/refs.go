package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// ref is one expression and the names it refers to: metric names of its
// selectors, and label names of its matchers, groupings and vector
// matchings.
type ref struct {
	Source  string   `json:"source"`
	Expr    string   `json:"expr"`
	Metrics []string `json:"metrics"`
	Labels  []string `json:"labels"`
}

func printRefs(w io.Writer, files []string) error {
	var all []ref
	var errs []error
	for _, f := range files {
		var refs []ref
		var err error
		if isDashboard(f) {
			refs, err = dashboardRefs(f)
		} else {
			refs, err = ruleRefs(f)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
		}
		all = append(all, refs...)
	}
	if err := errList("", errs); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(all)
}

func ruleRefs(file string) ([]ref, error) {
	groups, err := rulefmtGroups(file)
	if err != nil {
		return nil, err
	}
	var out []ref
	for _, g := range groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			x, err := refOf(file+": "+name, r.Expr)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
	}
	return out, nil
}

// grafanaVars are Grafana's variables in an expression: an interval
// variable becomes a duration, any other a string (they stand in
// matchers' values).
var (
	grafanaInterval = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)(_ms|_s)?\}?`)
	grafanaVar      = regexp.MustCompile(`\$\{[A-Za-z0-9_]+(:[a-z]+)?\}|\$[A-Za-z0-9_]+|\[\[[A-Za-z0-9_]+\]\]`)
	labelValues     = regexp.MustCompile(`^\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)
)

func substituteGrafana(expr string) string {
	return grafanaVar.ReplaceAllString(grafanaInterval.ReplaceAllString(expr, "5m"), "x")
}

// dashboardRefs reads every target's expr and every query variable of a
// Grafana dashboard (label_values(selector, label) counts as the selector
// and the label).
func dashboardRefs(file string) ([]ref, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	var out []ref
	var errs []error
	add := func(source, expr string, extraLabels ...string) {
		x, err := refOf(source, substituteGrafana(expr))
		if err != nil {
			errs = append(errs, err)
			return
		}
		x.Expr = expr
		x.Labels = sorted(append(x.Labels, extraLabels...))
		out = append(out, x)
	}
	var panels func(list []any)
	panels = func(list []any) {
		for _, p := range list {
			panel, _ := p.(map[string]any)
			title, _ := panel["title"].(string)
			targets, _ := panel["targets"].([]any)
			for i, t := range targets {
				target, _ := t.(map[string]any)
				if expr, ok := target["expr"].(string); ok {
					add(fmt.Sprintf("%s: panel %q target %d", file, title, i), expr)
				}
			}
			nested, _ := panel["panels"].([]any) // collapsed rows
			panels(nested)
		}
	}
	list, _ := doc["panels"].([]any)
	panels(list)
	templating, _ := doc["templating"].(map[string]any)
	vars, _ := templating["list"].([]any)
	for _, v := range vars {
		variable, _ := v.(map[string]any)
		if variable["type"] != "query" {
			continue
		}
		name, _ := variable["name"].(string)
		q := variable["query"]
		if obj, ok := q.(map[string]any); ok {
			q = obj["query"]
		}
		query, _ := q.(string)
		source := fmt.Sprintf("%s: variable %s", file, name)
		if m := labelValues.FindStringSubmatch(query); m != nil {
			add(source, m[1], m[2])
		} else if query != "" {
			add(source, query)
		}
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("no expression found"))
	}
	return out, errList("", errs)
}

func refOf(source, expr string) (ref, error) {
	e, err := newParser().ParseExpr(expr)
	if err != nil {
		return ref{}, fmt.Errorf("%s: %w", source, err)
	}
	metrics, lbls := map[string]bool{}, map[string]bool{}
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			if n.Name != "" {
				metrics[n.Name] = true
			}
			for _, m := range n.LabelMatchers {
				if m.Name == labels.MetricName {
					if m.Type == labels.MatchEqual {
						metrics[m.Value] = true
					}
					continue
				}
				lbls[m.Name] = true
			}
		case *parser.AggregateExpr:
			for _, l := range n.Grouping {
				lbls[l] = true
			}
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				for _, l := range append(n.VectorMatching.MatchingLabels, n.VectorMatching.Include...) {
					lbls[l] = true
				}
			}
		}
		return nil
	})
	if len(metrics) == 0 {
		return ref{}, fmt.Errorf("%s: %q names no metric", source, expr)
	}
	return ref{Source: source, Expr: strings.TrimSpace(expr), Metrics: keys(metrics), Labels: keys(lbls)}, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return keys(m)
}

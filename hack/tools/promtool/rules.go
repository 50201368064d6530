package main

import (
	"fmt"
	"io"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// newParser is PromQL as Prometheus parses it by default: no experimental
// functions or syntax, so the rules load in any recent Prometheus.
func newParser() parser.Parser { return parser.NewParser(parser.Options{}) }

// loadRules parses and validates one rule file as Prometheus does when it
// loads it (unknown fields refused, every expression and template parsed)
// with the legacy name scheme, which Prometheus 2 requires too. It refuses
// what the unit tests here do not evaluate (recording rules, group labels,
// limits and query offsets), so nothing passes a test it did not run, and
// an alert name used twice, which the tests could not tell apart.
func loadRules(file string) ([]*alertRule, error) {
	groups, errs := rulefmt.ParseFile(file, false, model.LegacyValidation, newParser(), logger)
	if len(errs) > 0 {
		return nil, errList("", errs)
	}
	var out []*alertRule
	seen := map[string]bool{}
	for _, g := range groups.Groups {
		if len(g.Labels) > 0 || g.Limit != 0 || g.QueryOffset != nil {
			errs = append(errs, fmt.Errorf("%s: group %s: labels, limit and query_offset are not supported by promcheck", file, g.Name))
		}
		for _, r := range g.Rules {
			if r.Record != "" {
				errs = append(errs, fmt.Errorf("%s: group %s: recording rule %s: not supported by promcheck", file, g.Name, r.Record))
				continue
			}
			if seen[r.Alert] {
				errs = append(errs, fmt.Errorf("%s: alert %s defined twice", file, r.Alert))
			}
			seen[r.Alert] = true
			out = append(out, &alertRule{
				name: r.Alert, expr: r.Expr, hold: time.Duration(r.For), keepFiringFor: time.Duration(r.KeepFiringFor),
				labels: labels.FromMap(r.Labels), annotations: labels.FromMap(r.Annotations),
				active: map[uint64]*alert{},
			})
		}
	}
	return out, errList("", errs)
}

func checkRules(w io.Writer, files []string) error {
	var errs []error
	for _, f := range files {
		rules, err := loadRules(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(w, "%s: %d alerting rules OK\n", f, len(rules))
	}
	return errList("", errs)
}

// rulefmtGroups is every rule of a file as written, for refs.
func rulefmtGroups(file string) ([]rulefmt.RuleGroup, error) {
	groups, errs := rulefmt.ParseFile(file, false, model.LegacyValidation, newParser(), logger)
	if len(errs) > 0 {
		return nil, errList("", errs)
	}
	return groups.Groups, nil
}

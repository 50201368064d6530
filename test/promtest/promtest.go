// Package promtest reads single series out of a Prometheus registry, for
// tests that check what a component counted.
package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Value returns the value of the gauge or counter series of name that has
// every label in labels (and maybe others), and whether there is one.
func Value(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			matched := 0
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
					matched++
				}
			}
			if matched != len(labels) {
				continue
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunks"
)

// scrapeEval scrapes each target (pod=URL of its /metrics) scrapes times,
// every apart, as Prometheus would (the target labels namespace and pod
// added to every series), and evaluates every alerting rule of ruleFile
// after each scrape with the alert state machine. What only real series
// can show fails it: an expression that errors on them (vector matching
// with duplicate label sets, say). It prints, per rule, the series the
// expression returned at the last scrape and the alerts firing.
func scrapeEval(w io.Writer, ruleFile, namespace string, targets []string, scrapes int, every time.Duration) error {
	rules, err := loadRules(ruleFile)
	if err != nil {
		return err
	}
	samples := map[string][]chunks.Sample{}
	lsets := map[string]labels.Labels{}
	var times []time.Time
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range scrapes {
		if i > 0 {
			time.Sleep(every)
		}
		now := time.Now()
		times = append(times, now)
		for _, target := range targets {
			pod, url, ok := strings.Cut(target, "=")
			if !ok {
				return fmt.Errorf("target %q: want pod=URL", target)
			}
			if err := scrapeInto(client, url, namespace, pod, now, samples, lsets); err != nil {
				return err
			}
		}
	}
	var all []storage.Series
	for key, lset := range lsets {
		all = append(all, storage.NewListSeries(lset, samples[key]))
	}
	sort.Slice(all, func(i, j int) bool { return labels.Compare(all[i].Labels(), all[j].Labels()) < 0 })

	p := newParser()
	var till int64
	queryable := &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
			return selectSeries(all, till, ms)
		},
	}}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: time.Minute, Parser: p})
	instant := instantQuery(engine, queryable)
	var last map[string]int
	ctx := context.Background()
	for _, ts := range times[1:] {
		till = ts.UnixMilli()
		last = map[string]int{}
		for _, r := range rules {
			query := func(ctx context.Context, qs string, at time.Time) (promql.Vector, error) {
				v, err := instant(ctx, qs, at)
				last[r.name] = len(v)
				return v, err
			}
			if err := r.eval(ctx, ts, query); err != nil {
				return fmt.Errorf("alert %s on the scraped series: %w", r.name, err)
			}
		}
	}
	fmt.Fprintf(w, "%d series from %d targets, %d scrapes\n", len(all), len(targets), scrapes)
	for _, r := range rules {
		// What the expression compares with its threshold: the series the
		// rule watches, most of which stay under it on a healthy target.
		watched := "-"
		if expr, err := p.ParseExpr(r.expr); err == nil {
			if be, ok := expr.(*parser.BinaryExpr); ok && be.Op.IsComparisonOperator() {
				v, err := instant(ctx, be.LHS.String(), times[len(times)-1])
				if err != nil {
					return fmt.Errorf("alert %s, left of its comparison, on the scraped series: %w", r.name, err)
				}
				watched = strconv.Itoa(len(v))
			}
		}
		fmt.Fprintf(w, "%s: %d series, watching %s, firing %v\n", r.name, last[r.name], watched, r.firing())
	}
	return nil
}

// scrapeInto reads one exposition and appends its samples at ts, keyed by
// their label sets.
func scrapeInto(client *http.Client, url, namespace, pod string, ts time.Time, samples map[string][]chunks.Sample, lsets map[string]labels.Labels) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	// Bounded: a target is a check's input, not trusted to be small.
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	add := func(name string, m *dto.Metric, extra map[string]string, v float64) {
		b := labels.NewBuilder(labels.EmptyLabels())
		b.Set(labels.MetricName, name)
		for _, l := range m.GetLabel() {
			b.Set(l.GetName(), l.GetValue())
		}
		for k, v := range extra {
			b.Set(k, v)
		}
		b.Set("namespace", namespace)
		b.Set("pod", pod)
		lset := b.Labels()
		key := lset.String()
		lsets[key] = lset
		samples[key] = append(samples[key], floatSample{t: ts.UnixMilli(), f: v})
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m, nil, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m, nil, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m, nil, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					if math.IsInf(b.GetUpperBound(), +1) {
						continue // added below
					}
					add(name+"_bucket", m, map[string]string{"le": formatFloat(b.GetUpperBound())}, float64(b.GetCumulativeCount()))
				}
				add(name+"_bucket", m, map[string]string{"le": "+Inf"}, float64(h.GetSampleCount()))
				add(name+"_sum", m, nil, h.GetSampleSum())
				add(name+"_count", m, nil, float64(h.GetSampleCount()))
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					add(name, m, map[string]string{"quantile": formatFloat(q.GetQuantile())}, q.GetValue())
				}
				add(name+"_sum", m, nil, s.GetSampleSum())
				add(name+"_count", m, nil, float64(s.GetSampleCount()))
			}
		}
	}
	return nil
}

func formatFloat(f float64) string {
	if math.IsInf(f, +1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

package main

// Unit tests in promtool's `test rules` format (rule_files,
// evaluation_interval, tests of input_series and alert_rule_test),
// evaluated as promtool evaluates them: series loaded at the group's
// interval from time 0, every rule evaluated each evaluation_interval up
// to the last eval_time, and an eval_time compared with the evaluation at
// or just before it. Fields promtool knows and this does not
// (promql_expr_test, external_labels, start_timestamp, group_eval_order,
// ...) are refused rather than ignored.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"go.yaml.in/yaml/v3"
)

type testFile struct {
	RuleFiles          []string       `yaml:"rule_files"`
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	Tests              []testGroup    `yaml:"tests"`
}

type testGroup struct {
	Name           string          `yaml:"name"`
	Interval       model.Duration  `yaml:"interval"`
	InputSeries    []inputSeries   `yaml:"input_series"`
	AlertRuleTests []alertTestCase `yaml:"alert_rule_test"`
}

type inputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertTestCase struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []expAlert     `yaml:"exp_alerts"`
}

type expAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

// coverage records, per alert, whether a test expected it firing and
// whether one expected it silent.
type coverage struct {
	fires, silent map[string]bool
	rules         map[string]string // alert -> rule file
}

func testRules(w io.Writer, files []string) error {
	cov := coverage{fires: map[string]bool{}, silent: map[string]bool{}, rules: map[string]string{}}
	var errs []error
	for _, f := range files {
		if err := runTestFile(w, f, &cov); err != nil {
			errs = append(errs, fmt.Errorf("%s:\n%w", f, err))
		}
	}
	names := make([]string, 0, len(cov.rules))
	for name := range cov.rules {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !cov.fires[name] {
			errs = append(errs, fmt.Errorf("%s: alert %s: no test expects it to fire", cov.rules[name], name))
		}
		if !cov.silent[name] {
			errs = append(errs, fmt.Errorf("%s: alert %s: no test expects it not to fire (exp_alerts: [])", cov.rules[name], name))
		}
	}
	return errList("", errs)
}

func runTestFile(w io.Writer, file string, cov *coverage) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var tf testFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&tf); err != nil {
		return err
	}
	if tf.EvaluationInterval == 0 {
		tf.EvaluationInterval = model.Duration(time.Minute)
	}
	rules := map[string]*alertRule{}
	var order []*alertRule
	for _, rf := range tf.RuleFiles {
		if !filepath.IsAbs(rf) {
			rf = filepath.Join(filepath.Dir(file), rf)
		}
		loaded, err := loadRules(rf)
		if err != nil {
			return err
		}
		for _, r := range loaded {
			if _, dup := rules[r.name]; dup {
				return fmt.Errorf("alert %s defined in two rule files", r.name)
			}
			rules[r.name] = r
			order = append(order, r)
			cov.rules[r.name] = rf
		}
	}
	var errs []error
	for i, tg := range tf.Tests {
		name := tg.Name
		if name == "" {
			name = fmt.Sprintf("unnamed#%d", i)
		}
		if tg.Interval == 0 {
			tg.Interval = tf.EvaluationInterval
		}
		// Each group starts from fresh alert state, as promtool loads the
		// rules again per group.
		for _, r := range order {
			r.active = map[uint64]*alert{}
		}
		if err := tg.run(time.Duration(tf.EvaluationInterval), rules, order, cov); err != nil {
			errs = append(errs, fmt.Errorf("  test %s:\n%w", name, err))
			continue
		}
		fmt.Fprintf(w, "%s: test %s OK\n", file, name)
	}
	return errors.Join(errs...)
}

func (tg *testGroup) run(evalInterval time.Duration, rules map[string]*alertRule, order []*alertRule, cov *coverage) error {
	p := newParser()
	series, err := tg.load(p)
	if err != nil {
		return err
	}
	var till int64 // samples after the evaluation time are not loaded yet
	queryable := &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
			return selectSeries(series, till, ms)
		},
	}}
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples: 10000, Timeout: 100 * time.Second, Parser: p,
		NoStepSubqueryIntervalFn: func(int64) int64 { return evalInterval.Milliseconds() },
		EnableAtModifier:         true, EnableNegativeOffset: true,
	})
	query := instantQuery(engine, queryable)

	byTime := map[time.Duration][]alertTestCase{}
	var times []time.Duration
	for _, tc := range tg.AlertRuleTests {
		if _, ok := rules[tc.Alertname]; !ok {
			// promtool would compare nothing with nothing and pass.
			return fmt.Errorf("    alert_rule_test names alert %q, which no rule file defines", tc.Alertname)
		}
		t := time.Duration(tc.EvalTime)
		if _, ok := byTime[t]; !ok {
			times = append(times, t)
		}
		byTime[t] = append(byTime[t], tc)
	}
	slices.Sort(times)
	if len(times) == 0 {
		return errors.New("    no alert_rule_test")
	}

	ctx := context.Background()
	mint := time.Unix(0, 0).UTC()
	maxt := mint.Add(times[len(times)-1])
	var errs []error
	curr := 0
	for ts := mint; !ts.After(maxt); ts = ts.Add(evalInterval) {
		till = ts.UnixMilli()
		for _, r := range order {
			if err := r.eval(ctx, ts, query); err != nil {
				return fmt.Errorf("    rule: %s, time: %s, err: %w", r.name, ts.Sub(mint), err)
			}
		}
		for curr < len(times) && ts.Sub(mint) <= times[curr] && times[curr] < ts.Add(evalInterval).Sub(mint) {
			for _, tc := range byTime[times[curr]] {
				if err := compare(tc, rules[tc.Alertname].firing(), cov); err != nil {
					errs = append(errs, err)
				}
			}
			curr++
		}
	}
	return errors.Join(errs...)
}

// instantQuery evaluates an expression at one time on queryable, as a rule
// evaluation does: a scalar result is a vector of one sample.
func instantQuery(engine *promql.Engine, queryable storage.Queryable) queryFunc {
	return func(ctx context.Context, qs string, ts time.Time) (promql.Vector, error) {
		q, err := engine.NewInstantQuery(ctx, queryable, nil, qs, ts)
		if err != nil {
			return nil, err
		}
		defer q.Close()
		res := q.Exec(ctx)
		if res.Err != nil {
			return nil, res.Err
		}
		switch v := res.Value.(type) {
		case promql.Vector:
			return v, nil
		case promql.Scalar:
			return promql.Vector{promql.Sample{T: v.T, F: v.V, Metric: labels.EmptyLabels()}}, nil
		default:
			return nil, errors.New("rule result is not a vector or scalar")
		}
	}
}

func compare(tc alertTestCase, got []string, cov *coverage) error {
	var want []string
	for _, a := range tc.ExpAlerts {
		l := labels.FromMap(a.ExpLabels)
		b := labels.NewBuilder(l)
		b.Set(labels.AlertName, tc.Alertname)
		want = append(want, describe(b.Labels(), labels.FromMap(a.ExpAnnotations)))
	}
	if len(want) == 0 {
		cov.silent[tc.Alertname] = true
	} else {
		cov.fires[tc.Alertname] = true
	}
	sort.Strings(want)
	sort.Strings(got)
	if slices.Equal(want, got) {
		return nil
	}
	return fmt.Errorf("    alertname: %s, time: %s,\n        exp:%s,\n        got:%s",
		tc.Alertname, time.Duration(tc.EvalTime), list(want), list(got))
}

func list(s []string) string {
	if len(s) == 0 {
		return "[]"
	}
	return "\n            " + strings.Join(s, "\n            ")
}

// load expands the input series as promqltest's `load` does.
func (tg *testGroup) load(p parser.Parser) ([]storage.Series, error) {
	step := time.Duration(tg.Interval).Milliseconds()
	seen := map[uint64]bool{}
	var out []storage.Series
	for _, in := range tg.InputSeries {
		lset, values, err := p.ParseSeriesDesc(in.Series + " " + in.Values)
		if err != nil {
			return nil, fmt.Errorf("    input series %s: %w", in.Series, err)
		}
		if seen[lset.Hash()] {
			return nil, fmt.Errorf("    input series %s given twice", in.Series)
		}
		seen[lset.Hash()] = true
		var samples []chunks.Sample
		for i, v := range values {
			if v.Omitted {
				continue
			}
			if v.Histogram != nil {
				return nil, fmt.Errorf("    input series %s: native histograms are not supported by promcheck", in.Series)
			}
			samples = append(samples, floatSample{t: int64(i) * step, f: v.Value})
		}
		out = append(out, storage.NewListSeries(lset, samples))
	}
	sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].Labels(), out[j].Labels()) < 0 })
	return out, nil
}

// selectSeries returns the series matching every matcher, with their
// samples up to till, sorted by labels.
func selectSeries(all []storage.Series, till int64, ms []*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
	for _, s := range all {
		lset := s.Labels()
		if !slices.ContainsFunc(ms, func(m *labels.Matcher) bool { return !m.Matches(lset.Get(m.Name)) }) {
			out = append(out, upTo(s.(*storage.SeriesEntry), till))
		}
	}
	return &seriesSet{series: out, i: -1}
}

func upTo(s *storage.SeriesEntry, till int64) storage.Series {
	var samples []chunks.Sample
	it := s.Iterator(nil)
	for it.Next() == chunkenc.ValFloat {
		if t, f := it.At(); t <= till {
			samples = append(samples, floatSample{t: t, f: f})
		}
	}
	return storage.NewListSeries(s.Labels(), samples)
}

type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// floatSample is a float sample (chunks.Sample).
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                    { return s.t }
func (floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                  { return s.f }
func (floatSample) H() *histogram.Histogram       { return nil }
func (floatSample) FH() *histogram.FloatHistogram { return nil }
func (floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample         { return s }

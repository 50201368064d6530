package main

// The alert state machine of rules.AlertingRule.Eval in the pinned
// Prometheus release (rules/alerting.go, Apache License 2.0), ported
// because importing package rules links the cloud SDKs (see main.go).
// What differs: a template that fails to expand is an error here, where
// Prometheus writes the error into the label or annotation.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/template"
)

type alertState int

const (
	stateInactive alertState = iota
	statePending
	stateFiring
)

// resolvedRetention is how long a resolved alert is kept (rules'
// resolvedRetention).
const resolvedRetention = 15 * time.Minute

type alertRule struct {
	name, expr          string
	hold, keepFiringFor time.Duration
	labels, annotations labels.Labels
	active              map[uint64]*alert
}

type alert struct {
	labels, annotations labels.Labels
	state               alertState
	activeAt            time.Time
	resolvedAt          time.Time
	keepFiringSince     time.Time
	value               float64
}

type queryFunc func(ctx context.Context, q string, ts time.Time) (promql.Vector, error)

// templateDefs are the variables Prometheus defines for alert templates.
const templateDefs = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"

func (r *alertRule) eval(ctx context.Context, ts time.Time, query queryFunc) error {
	res, err := query(ctx, r.expr, ts)
	if err != nil {
		return err
	}
	resultFPs := map[uint64]struct{}{}
	alerts := make(map[uint64]*alert, len(res))
	var errs []error
	for _, smpl := range res {
		data := template.AlertTemplateData(smpl.Metric.Map(), nil, "", smpl)
		expand := func(what, text string) string {
			out, err := template.NewTemplateExpander(ctx, templateDefs+text, "__alert_"+r.name, data,
				model.Time(timestamp.FromTime(ts)), template.QueryFunc(query), nil, nil).Expand()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
			}
			return out
		}
		lb := labels.NewBuilder(smpl.Metric)
		lb.Del(labels.MetricName)
		r.labels.Range(func(l labels.Label) { lb.Set(l.Name, expand("label "+l.Name, l.Value)) })
		lb.Set(labels.AlertName, r.name)
		ab := labels.NewBuilder(labels.EmptyLabels())
		r.annotations.Range(func(a labels.Label) { ab.Set(a.Name, expand("annotation "+a.Name, a.Value)) })
		lbs := lb.Labels()
		h := lbs.Hash()
		resultFPs[h] = struct{}{}
		if _, ok := alerts[h]; ok {
			return errors.New("vector contains metrics with the same labelset after applying alert labels")
		}
		alerts[h] = &alert{labels: lbs, annotations: ab.Labels(), activeAt: ts, state: statePending, value: smpl.F}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for h, a := range alerts {
		if old, ok := r.active[h]; ok && old.state != stateInactive {
			old.value, old.annotations = a.value, a.annotations
			continue
		}
		r.active[h] = a
	}
	for fp, a := range r.active {
		if _, ok := resultFPs[fp]; !ok {
			keepFiring := false
			if a.state == stateFiring && r.keepFiringFor > 0 {
				if a.keepFiringSince.IsZero() {
					a.keepFiringSince = ts
				}
				keepFiring = ts.Sub(a.keepFiringSince) < r.keepFiringFor
			}
			if a.state == statePending || (!a.resolvedAt.IsZero() && ts.Sub(a.resolvedAt) > resolvedRetention) {
				delete(r.active, fp)
			}
			if a.state != stateInactive && !keepFiring {
				a.state = stateInactive
				a.resolvedAt = ts
			}
			if !keepFiring {
				continue
			}
		} else {
			a.keepFiringSince = time.Time{}
		}
		if a.state == statePending && ts.Sub(a.activeAt) >= r.hold {
			a.state = stateFiring
		}
		if a.state == stateFiring && ts.Sub(a.activeAt) < r.hold {
			a.state = statePending
			a.keepFiringSince = time.Time{}
		}
	}
	return nil
}

// firing lists the firing alerts as promtool compares them: labels and
// annotations, sorted.
func (r *alertRule) firing() []string {
	var out []string
	for _, a := range r.active {
		if a.state == stateFiring && a.resolvedAt.IsZero() {
			out = append(out, describe(a.labels, a.annotations))
		}
	}
	return out
}

func describe(lbls, annotations labels.Labels) string {
	var b strings.Builder
	b.WriteString(lbls.String())
	b.WriteString(" annotations ")
	b.WriteString(annotations.String())
	return b.String()
}

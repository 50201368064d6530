package environmentd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/standin/clap"
)

// CaughtUpChecker tells whether a new generation's clusters are caught up
// and, if not, what holds them up.
type CaughtUpChecker interface {
	// CaughtUp also returns, for each cluster caught up at this check, its
	// replicas' health (keyed by cluster id): the stability gate's input.
	CaughtUp(ctx context.Context) (ok bool, waitingFor string, caughtUp map[string]ClusterHealth)
}

// CatchUpConfig is environmentd's 0dt catch-up settings: system
// parameters (upstream src/adapter-types/src/dyncfgs.rs), which the
// operator can set with --system-parameter-default.
type CatchUpConfig struct {
	// CheckInterval is 0dt_deployment_hydration_check_interval.
	CheckInterval time.Duration
	// MaxWait is with_0dt_deployment_max_wait: past it the generation
	// proceeds without being caught up (or panics, below).
	MaxWait time.Duration
	// PanicAfterTimeout is enable_0dt_deployment_panic_after_timeout.
	PanicAfterTimeout bool
	// DDLCheckInterval is with_0dt_deployment_ddl_check_interval: how often
	// the catalog is read for DDL that the new generation has not seen.
	DDLCheckInterval time.Duration
	// StabilityCheck is enable_0dt_caught_up_stability_check (from 26.32;
	// before, a caught-up cluster is ready at once).
	StabilityCheck bool
	// StabilityPeriod is with_0dt_caught_up_check_stability_period: how
	// long each caught-up cluster must stay caught up, every replica Ready
	// and none restarted, before the generation is ready. Zero still
	// requires them healthy at one check.
	StabilityPeriod time.Duration
}

// DefaultCatchUpConfig is upstream's defaults: a check every 10 s, and a
// year's wait, which in practice never promotes a generation that has not
// hydrated.
var DefaultCatchUpConfig = CatchUpConfig{CheckInterval: 10 * time.Second, MaxWait: 365 * 24 * time.Hour, DDLCheckInterval: 5 * time.Minute}

// catchUpConfig reads the settings of environmentd at version from the
// --system-parameter-default values (KEY=VALUE, the last one of a key
// wins). A parameter version does not have is ignored, as upstream warns
// and ignores an unknown one.
func catchUpConfig(m *clap.Matches, version imageref.Version) (CatchUpConfig, error) {
	cfg := DefaultCatchUpConfig
	gated := version.AtLeast(stabilityGateVersion)
	if gated {
		cfg.StabilityCheck, cfg.StabilityPeriod = true, DefaultStabilityPeriod
	}
	params := []param{
		durationParam("0dt_deployment_hydration_check_interval", &cfg.CheckInterval),
		durationParam("with_0dt_deployment_max_wait", &cfg.MaxWait),
		durationParam("with_0dt_deployment_ddl_check_interval", &cfg.DDLCheckInterval),
		boolParam("enable_0dt_deployment_panic_after_timeout", &cfg.PanicAfterTimeout),
	}
	// An older environmentd does not have the stability gate's.
	if gated {
		params = append(params, durationParam("with_0dt_caught_up_check_stability_period", &cfg.StabilityPeriod),
			boolParam("enable_0dt_caught_up_stability_check", &cfg.StabilityCheck))
	}
	return cfg, readParams(m, params...)
}

// catchUp is upstream's preflight wait (deployment/preflight.rs): catching
// up until the clusters are caught up, an administrator skips it, or the
// maximum wait passes.
// next is the next user item id when preflight began: an item with a
// higher id is DDL run against the leader since (upstream
// check_ddl_changes; a drop alone is not).
func (p *Process) catchUp(ctx context.Context, plan *Plan, d *Deployment, next uint64) error {
	cfg, err := catchUpConfig(plan.Args, plan.Version)
	if err != nil {
		return fatal("%v", err)
	}
	// Only a read-only generation takes these intervals, and a zero one
	// panics its timer (a leader boots with one).
	if cfg.CheckInterval <= 0 || cfg.DDLCheckInterval <= 0 {
		return &ExitError{Code: ExitPanic, Message: "panicked: `period` must be non-zero."}
	}
	ddl := func() error {
		var items UserItems
		err := p.catalogCall(ctx, func() (err error) { items, err = p.Catalog.UserItems(ctx); return err })
		if ctx.Err() != nil {
			return nil
		}
		if err != nil { // upstream's unwrap_or_terminate
			return fatal("can open in savepoint mode: %v", err)
		}
		if created := items.Since(next); len(created) > 0 {
			objects := make([]string, len(created))
			for i, id := range created {
				objects[i] = fmt.Sprintf("{object_id: u%d}", id)
			}
			return halt("there have been DDL that we need to react to; rebooting in read-only mode. New objects: [%s]", strings.Join(objects, ", "))
		}
		return nil
	}
	p.Log.Info("waiting for deployment to be caught up", "check_interval", cfg.CheckInterval.String(), "max_wait", cfg.MaxWait.String())
	gate := stabilityGate{period: cfg.StabilityPeriod}
	skip := d.SetCatchingUp()
	maxWait := time.NewTimer(cfg.MaxWait)
	defer maxWait.Stop()
	check := time.NewTicker(cfg.CheckInterval)
	defer check.Stop()
	ddlCheck := time.NewTicker(cfg.DDLCheckInterval)
	defer ddlCheck.Stop()
	last := ""
	for {
		ok, why, notYet := true, "", "deployment not caught up"
		if p.Replicas != nil {
			var caughtUp map[string]ClusterHealth
			ok, why, caughtUp = p.Replicas.CaughtUp(ctx)
			// Every check folds in, so a cluster's streak starts when it
			// is caught up, not when the last one is.
			if stable, waiting := gate.observe(caughtUp, time.Now()); cfg.StabilityCheck && ok && !stable {
				ok, why, notYet = false, waiting, "cluster is caught up but not yet stable for the required period"
			}
		}
		if ok {
			p.Log.Info("deployment caught up", "replicas", why)
			// A last look for DDL, unless catch-up was skipped.
			return ddl()
		}
		if why != last { // one line a change, not one a check
			p.Log.Info(notYet, "waiting_for", why)
			last = why
		}
		select {
		case <-skip:
			p.Log.Info("skipping waiting for deployment to catch up due to administrator request")
			return nil
		case <-maxWait.C:
			if cfg.PanicAfterTimeout {
				return &ExitError{Code: ExitPanic, Message: fmt.Sprintf("thread 'preflight_0dt' panicked: not caught up within %v", cfg.MaxWait)}
			}
			p.Log.Info(fmt.Sprintf("not caught up within %v, proceeding now", cfg.MaxWait))
			return ddl()
		case err := <-p.served:
			return p.servingEnded(err)
		case <-ddlCheck.C:
			if err := ddl(); err != nil {
				return err
			}
		case <-check.C:
		case <-ctx.Done():
			return nil
		}
	}
}

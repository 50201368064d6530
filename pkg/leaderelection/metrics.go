package leaderelection

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// leaseMetrics are one lease's series.
type leaseMetrics struct {
	isLeader    prometheus.Gauge
	transitions prometheus.Counter
}

// newLeaseMetrics returns the series of lease, registering the vectors on
// reg (nil: not exported). Several Runs may share reg: a vector already
// registered there is reused. On any other registration error the series
// still work but are not exported.
func newLeaseMetrics(reg prometheus.Registerer, lease string) (leaseMetrics, error) {
	isLeader := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "orchestratord",
		Subsystem: "leader_election",
		Name:      "is_leader",
		Help:      "1 while this replica leads the lease (its reconciler may write), else 0.",
	}, []string{"lease"})
	transitions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "orchestratord",
		Subsystem: "leader_election",
		Name:      "transitions_total",
		Help:      "Times this replica started or stopped leading the lease.",
	}, []string{"lease"})
	var errs []error
	if reg != nil {
		var err error
		isLeader, err = register(reg, isLeader)
		errs = append(errs, err)
		transitions, err = register(reg, transitions)
		errs = append(errs, err)
	}
	m := leaseMetrics{isLeader: isLeader.WithLabelValues(lease), transitions: transitions.WithLabelValues(lease)}
	m.isLeader.Set(0)
	return m, errors.Join(errs...)
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

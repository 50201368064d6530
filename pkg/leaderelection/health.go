package leaderelection

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// HealthChecker is a /healthz check over every Lease in a Terms record. It
// fails while any held Lease is overdue for renewal: its last successful
// renewal is older than the lease duration plus the tolerance, which is
// client-go's HealthzAdaptor rule (LeaderElector.Check) aggregated over
// leases. Run normally stops leading long before (at the renew deadline);
// the check catches a replica that cannot get there, e.g. a lead function
// that ignores its context, so the kubelet restarts it.
type HealthChecker struct {
	terms     *Terms
	tolerance time.Duration
}

// NewHealthChecker returns a check that tolerates a held Lease going
// unrenewed for its lease duration plus tolerance (client-go's
// NewLeaderHealthzAdaptor timeout).
func NewHealthChecker(terms *Terms, tolerance time.Duration) *HealthChecker {
	return &HealthChecker{terms: terms, tolerance: tolerance}
}

// Name names the check, as k8s.io/apiserver's healthz.HealthChecker does.
func (h *HealthChecker) Name() string { return "leader-election" }

// Check returns an error naming every held Lease overdue for renewal.
func (h *HealthChecker) Check(_ *http.Request) error {
	overdue := h.terms.overdue(h.tolerance)
	if len(overdue) == 0 {
		return nil
	}
	slices.Sort(overdue)
	return fmt.Errorf("leases overdue for renewal: %s", strings.Join(overdue, ", "))
}

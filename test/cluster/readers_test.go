package cluster

import (
	"errors"
	"testing"
)

// The API server's errors, as a restarted kube-apiserver (v1.37) wrote them.
func TestConversionFailuresAreToldApart(t *testing.T) {
	for _, c := range []struct {
		err        string
		unresolved bool
		cause      string
	}{
		{`conversion webhook for materialize.cloud/v1alpha1, Kind=Materialize failed: Post "https://orchestratord-webhook.orchestratord.svc:443/convert?timeout=30s": service "orchestratord-webhook" not found`, true, CauseOther},
		{`conversion webhook for materialize.cloud/v1alpha1, Kind=Materialize failed: Post "https://orchestratord-webhook.orchestratord.svc:443/convert?timeout=30s": dial tcp 10.96.112.81:443: connect: connection refused`, false, CauseRefused},
		{`conversion webhook for materialize.cloud/v1alpha1, Kind=Materialize failed: Post "https://orchestratord-webhook.orchestratord.svc:443/convert?timeout=30s": read tcp 10.0.0.1:4000->10.96.112.81:443: read: connection reset by peer`, false, CauseCut},
		// Not a conversion at all: the Materialize itself is missing.
		{`materializes.materialize.cloud "sample" not found`, false, CauseOther},
	} {
		err := errors.New(c.err)
		if got := serviceUnresolved(err); got != c.unresolved {
			t.Errorf("serviceUnresolved(%q) = %v, want %v", c.err, got, c.unresolved)
		}
		if got := FailureCause(err); got != c.cause {
			t.Errorf("FailureCause(%q) = %q, want %q", c.err, got, c.cause)
		}
	}
}

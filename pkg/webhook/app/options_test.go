package app_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/materializeinc/orchestratord/pkg/webhook/app"
)

// --ca-renew-before (the chart's tls.caRenewBefore) is refused when a CA
// would be due at once (not less than --ca-validity) or would cut its
// serving certificates short (less than --cert-validity), before anything
// starts.
func TestCARenewBeforeIsChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ca-renew-before=8760h"}, "less than --ca-validity=8760h"},
		{[]string{"--ca-validity=87600h", "--ca-renew-before=87600h"}, "less than --ca-validity"},
		{[]string{"--ca-renew-before=24h"}, "at least --cert-validity=168h"},
		{[]string{"--ca-renew-before=24h", "--cert-validity=48h"}, "at least --cert-validity=48h"},
		{[]string{"--ca-renew-before=-1h"}, "must not be negative"},
	} {
		cmd := app.NewCommand()
		cmd.SetArgs(append([]string{"--namespace=ns", "--listen-address=127.0.0.1:0", "--metrics-address=127.0.0.1:0",
			"--health-address=127.0.0.1:0"}, tc.args...))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

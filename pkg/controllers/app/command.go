// Package app is the controllers program: its flags and its start-up.
package app

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/materializeinc/orchestratord/pkg/cli"
	"github.com/materializeinc/orchestratord/pkg/logging"
)

// Options are the controllers' flags; their names are a contract that the
// Helm chart and other tooling rely on.
type Options struct {
	Logging                 logging.Options
	Kubeconfig              string
	LeaderElectionNamespace string
	LeaderElectionIdentity  string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
	Controllers             []string
	MetricsAddress          string
	HealthAddress           string
	Workers                 int
}

// NewCommand returns the controllers root command.
func NewCommand() *cobra.Command {
	o := &Options{}
	cmd := cli.NewRoot("controllers", "Run the orchestratord reconcilers",
		"Runs the materialize, balancer and console reconcilers. Each holds its own\n"+
			"Lease, so several replicas run and exactly one reconciles each controller.\n"+
			"Every flag can also be set by ORCHESTRATORD_<FLAG_WITH_UNDERSCORES>.")
	fs := cmd.Flags()
	o.Logging.AddFlags(fs)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster configuration")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the Leases; empty means the pod's namespace")
	fs.StringVar(&o.LeaderElectionIdentity, "leader-election-identity", "", "holder identity; empty means $POD_NAME, else hostname plus a random suffix")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a Lease is valid without renewal")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long a leader retries renewing before it stops its writes and exits")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", 2*time.Second, "how often to try to acquire or renew a Lease")
	fs.StringSliceVar(&o.Controllers, "controllers", []string{"materialize", "balancer", "console"}, "reconcilers to run")
	fs.StringVar(&o.MetricsAddress, "metrics-address", ":8080", "address of the Prometheus metrics endpoint")
	fs.StringVar(&o.HealthAddress, "health-address", ":8081", "address of /healthz and /readyz")
	fs.IntVar(&o.Workers, "workers", 2, "concurrent reconciles per controller")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return errors.New("the reconcilers are not implemented yet")
	}
	return cmd
}

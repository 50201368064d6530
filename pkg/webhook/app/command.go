// Package app is the webhook program: its flags and its start-up.
package app

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/materializeinc/orchestratord/pkg/cli"
	"github.com/materializeinc/orchestratord/pkg/logging"
)

// Options are the webhook's flags; their names are a contract that the Helm
// chart and other tooling rely on.
type Options struct {
	Logging        logging.Options
	ListenAddress  string
	MetricsAddress string
	HealthAddress  string
	TLSMode        string
	TLSCertFile    string
	TLSKeyFile     string
	TLSCAFile      string
	Namespace      string
	ServiceName    string
	ShutdownDrain  time.Duration
}

// NewCommand returns the webhook root command.
func NewCommand() *cobra.Command {
	o := &Options{}
	cmd := cli.NewRoot("webhook", "Serve the Materialize CRD conversion webhook",
		"Serves POST /convert (ConversionReview v1) for materialize.cloud Materialize\n"+
			"v1alpha1 <-> v1 over HTTPS. Every flag can also be set by\n"+
			"ORCHESTRATORD_<FLAG_WITH_UNDERSCORES>.")
	fs := cmd.Flags()
	o.Logging.AddFlags(fs)
	fs.StringVar(&o.ListenAddress, "listen-address", ":9443", "HTTPS address of /convert")
	fs.StringVar(&o.MetricsAddress, "metrics-address", ":8080", "plain-HTTP address of the Prometheus metrics")
	fs.StringVar(&o.HealthAddress, "health-address", ":8081", "plain-HTTP address of /healthz and /readyz")
	fs.StringVar(&o.TLSMode, "tls-mode", "self-signed", "where the serving certificate comes from: self-signed, secret or cert-manager")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serving certificate (secret and cert-manager modes); re-read when it changes")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "serving key (secret and cert-manager modes); re-read when it changes")
	fs.StringVar(&o.TLSCAFile, "tls-ca-file", "", "optional CA bundle written into the CRD's caBundle (secret mode)")
	fs.StringVar(&o.Namespace, "namespace", "", "namespace of the webhook Service and CA Secret; empty means the pod's namespace")
	fs.StringVar(&o.ServiceName, "service-name", "orchestratord-webhook", "name of the webhook Service, for the serving certificate's DNS names")
	fs.DurationVar(&o.ShutdownDrain, "shutdown-drain", 10*time.Second, "after SIGTERM, how long to keep serving with /readyz failing")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return errors.New("the webhook server is not implemented yet")
	}
	return cmd
}

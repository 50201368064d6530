package balancerd

import (
	"strings"
	"testing"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/balancer"
)

func TestAcceptsTheBalancersCommandLine(t *testing.T) {
	args, err := balancer.DefaultConfig().Args(v1alpha1.BalancerSpec{StaticRouting: &v1alpha1.StaticRoutingConfig{
		EnvironmentdNamespace: "envs", EnvironmentdServiceName: "mzabc-environmentd"}})
	if err != nil {
		t.Fatal(err)
	}
	pgwire, https, internal, tlsConfig, err := Check(args, nil)
	if err != nil {
		t.Fatalf("balancerd refuses %q: %v", args, err)
	}
	if pgwire != "0.0.0.0:6875" || https != "0.0.0.0:6876" || internal != "0.0.0.0:8080" || tlsConfig != nil {
		t.Errorf("addresses %s %s %s, tls %v", pgwire, https, internal, tlsConfig != nil)
	}
}

func TestRefusesWhatBalancerdRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pgwire-listen-addr=0.0.0.0:6875"}, "error: unexpected argument '--pgwire-listen-addr' found"},
		{[]string{"service", "--no-such-flag"}, "error: unexpected argument '--no-such-flag' found"},
		{[]string{"service", "--log-format=json"}, "error: unexpected argument '--log-format' found"},
		{[]string{"service", "--tls-mode=require", "--tls-cert=/nonexistent.crt", "--tls-key=/nonexistent.key",
			"--pgwire-listen-addr=0.0.0.0:6875", "--https-listen-addr=0.0.0.0:6876", "--internal-http-listen-addr=0.0.0.0:8080",
			"--static-resolver-addr=x:6875", "--https-resolver-template=x:6876"}, "balancerd: fatal:"},
	} {
		_, _, _, _, err := Check(c.args, nil)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Check(%q) = %v, want %q", c.args, err, c.want)
		}
	}
}

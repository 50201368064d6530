package console

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/test/controllertest"
	"github.com/materializeinc/orchestratord/test/upstream"
)

func TestMain(m *testing.M) { controllertest.Main(m) }

// startController starts this package's controller with upstream's default
// ports and the ingress network policy on, until the test ends. Ready
// conditions are written at once (QuietFor negative): no controller here
// makes a Deployment available, and the tests wait for Ready=False.
func startController(t *testing.T) *controllertest.Running {
	t.Helper()
	return startConfigured(t, func(*Config) {})
}

// startConfigured starts the controller with startController's Config as
// edit changes it.
func startConfigured(t *testing.T, edit func(*Config)) *controllertest.Running {
	t.Helper()
	cfg := DefaultConfig()
	cfg.IngressNetworkPolicy, cfg.IngressCIDRs = true, []string{"0.0.0.0/0"}
	cfg.QuietFor = -1
	edit(&cfg)
	return controllertest.StartController(t, Name, func(d controller.Deps) *controller.Controller {
		return New(d, cfg)
	})
}

// startUpstreamConfigured starts the controller with the settings upstream's
// Helm chart passes by default (upstream.ChartDefaults).
func startUpstreamConfigured(t *testing.T) *controllertest.Running {
	t.Helper()
	return startConfigured(t, func(cfg *Config) {
		cfg.Pods = upstream.ChartDefaults(corev1.PullAlways).Pods()
		cfg.IngressNetworkPolicy, cfg.IngressCIDRs = false, nil
	})
}

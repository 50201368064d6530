package balancer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/test/controllertest"
	"github.com/materializeinc/orchestratord/test/upstream"
)

func TestMain(m *testing.M) { controllertest.Main(m) }

// startController starts this package's controller with upstream's default
// ports and no operator-wide pod settings, until the test ends.
func startController(t *testing.T) *controllertest.Running {
	t.Helper()
	return controllertest.StartController(t, Name, func(d controller.Deps) *controller.Controller {
		return New(d, DefaultConfig())
	})
}

// startUpstreamConfigured starts the controller with the settings upstream's
// Helm chart passes by default (upstream.ChartDefaults).
func startUpstreamConfigured(t *testing.T) *controllertest.Running {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Pods = upstream.ChartDefaults(corev1.PullAlways).Pods()
	return controllertest.StartController(t, Name, func(d controller.Deps) *controller.Controller {
		return New(d, cfg)
	})
}

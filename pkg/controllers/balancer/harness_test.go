package balancer

import (
	"testing"

	"github.com/materializeinc/orchestratord/test/controllertest"
)

func TestMain(m *testing.M) { controllertest.Main(m) }

// startController starts this package's controller until the test ends.
func startController(t *testing.T) *controllertest.Running {
	t.Helper()
	return controllertest.StartController(t, Name, New)
}

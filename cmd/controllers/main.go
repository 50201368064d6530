// Command controllers runs the materialize, balancer and console reconcilers,
// each under its own coordination.k8s.io Lease.
package main

import (
	"github.com/materializeinc/orchestratord/pkg/cli"
	"github.com/materializeinc/orchestratord/pkg/controllers/app"
)

func main() {
	cli.Main(app.NewCommand())
}

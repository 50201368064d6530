// Command webhook serves the Materialize CRD conversion webhook
// (materialize.cloud v1alpha1 <-> v1). It is stateless: run as many replicas
// as availability needs.
package main

import (
	"github.com/materializeinc/orchestratord/pkg/cli"
	"github.com/materializeinc/orchestratord/pkg/webhook/app"
)

func main() {
	cli.Main(app.NewCommand())
}

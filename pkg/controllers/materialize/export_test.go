package materialize

import (
	"context"

	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
)

// Reconciler runs single reconciles outside a controller, over whatever the
// test put in d's informer stores (the informers need not run).
type Reconciler interface {
	Reconcile(ctx context.Context, key string) (controller.Result, error)
}

// NewReconciler is the reconciler New runs.
func NewReconciler(d controller.Deps, o Options) Reconciler { return newReconciler(d, o) }

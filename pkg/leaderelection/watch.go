package leaderelection

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// watch informs on the single Lease (a metadata.name field selector in the
// namespace) and signals released, without blocking, whenever the Lease is
// seen without a holder — client-go's release writes an empty holderIdentity
// and leaseDurationSeconds=1 — or is deleted. Run restarts its standby
// elector on that signal; it ignores it while leading.
func (c *candidate) watch(ctx context.Context, released chan<- string) {
	leases := c.cfg.Client.CoordinationV1().Leases(c.cfg.Namespace)
	selector := fields.OneTermEqualSelector("metadata.name", c.name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return leases.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return leases.Watch(ctx, opts)
		},
	}
	signal := func(reason string) {
		select {
		case released <- reason:
		default: // one pending signal is enough
		}
	}
	onLease := func(obj any) {
		if lease, ok := obj.(*coordinationv1.Lease); ok && (lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "") {
			signal("lease released")
		}
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger:        &c.clientGoLog,
		ListerWatcher: lw,
		ObjectType:    &coordinationv1.Lease{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    onLease,
			UpdateFunc: func(_, obj any) { onLease(obj) },
			DeleteFunc: func(any) { signal("lease deleted") },
		},
	})
	informer.RunWithContext(ctx)
}

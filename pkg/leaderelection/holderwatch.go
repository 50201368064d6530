package leaderelection

import (
	"context"
	"sync"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// holderWatch follows the pod of the process that holds the Lease, as named
// by its HolderAnnotation, and claims the Lease as soon as the kubelet
// reports that process terminated (Incarnation.terminatedIn): a crash, an
// OOM kill, a pod killed whole. The kubelet reports only what it saw; a
// holder whose node or kubelet went silent is never inferred dead, and its
// Lease is taken at expiry as before (expiryClaim).
type holderWatch struct {
	c      *candidate
	signal func(string)

	mu        sync.Mutex
	following *Incarnation
	cancel    context.CancelFunc
	done      chan struct{}
}

// follow watches the pod of lease's holder, unless it already does; a
// Lease without a usable annotation stops the watch.
func (h *holderWatch) follow(ctx context.Context, lease *coordinationv1.Lease) {
	holder := *lease.Spec.HolderIdentity
	inc, ok := parseHolder(lease.Annotations, holder)
	if !ok || holder == h.c.cfg.Identity {
		h.stop()
		return
	}
	h.mu.Lock()
	if h.following != nil && *h.following == *inc {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.stop()

	watchCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	h.mu.Lock()
	h.following, h.cancel, h.done = inc, cancel, done
	h.mu.Unlock()
	go func() {
		defer close(done)
		h.run(watchCtx, inc, lease.Namespace, lease.Name)
	}()
}

func (h *holderWatch) stop() {
	h.mu.Lock()
	cancel, done := h.cancel, h.done
	h.following, h.cancel, h.done = nil, nil, nil
	h.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// run informs on the one pod (a metadata.name field selector) until ctx is
// done or the Lease has been claimed.
func (h *holderWatch) run(ctx context.Context, inc *Incarnation, leaseNamespace, leaseName string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pods := h.c.cfg.Client.CoreV1().Pods(inc.Namespace)
	lw := byName(inc.Pod, pods.List, pods.Watch)
	var once sync.Once
	onPod := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !inc.terminatedIn(pod) {
			return
		}
		once.Do(func() {
			if h.claim(ctx, inc, leaseNamespace, leaseName) {
				h.signal("lease holder's process terminated")
			}
			cancel()
		})
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger:        &h.c.clientGoLog,
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    onPod,
			UpdateFunc: func(_, obj any) { onPod(obj) },
			// The object of a delete is the pod's last stored state: a
			// kubelet that confirmed termination wrote it before deleting.
			// A tombstone (DeletedFinalStateUnknown) proves nothing.
			DeleteFunc: onPod,
		},
	})
	informer.RunWithContext(ctx)
}

// claim takes the Lease if it is still held by the dead incarnation: read
// afresh, so that a holder restarted in the same pod that has reclaimed it
// meanwhile (its new incarnation in the annotation) is left alone, and
// written conditional on what was read.
func (h *holderWatch) claim(ctx context.Context, dead *Incarnation, namespace, name string) bool {
	current, err := h.c.cfg.Client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || current.Spec.HolderIdentity == nil {
		return false
	}
	inc, ok := parseHolder(current.Annotations, *current.Spec.HolderIdentity)
	if !ok || *inc != *dead {
		return false
	}
	h.c.log.Info("lease holder's process terminated", zap.String("holder", dead.Pod), zap.String("incarnation", dead.ID))
	// The claim, once sent, is seen through: the watch of the Lease sees it
	// land and stops this follower, whose cancellation would otherwise
	// abandon the response and leave a claim made but not known.
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.c.cfg.RenewDeadline)
	defer cancel()
	return h.c.take(claimCtx, current, "lease of a terminated holder claimed")
}

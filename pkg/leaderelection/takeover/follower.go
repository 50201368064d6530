package takeover

import (
	"context"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/materializeinc/orchestratord/pkg/kubeclient"
)

// Follower follows the pod of the process that holds a Lease, as named by
// its HolderAnnotation, and calls Terminated once the kubelet reports that
// process terminated (Incarnation.TerminatedIn): a crash, an OOM kill, a
// pod killed whole. The kubelet reports only what it saw; a holder whose
// node or kubelet went silent is never inferred dead, and its Lease is
// taken at expiry as before.
type Follower struct {
	Client kubeclient.Interface
	// Self is this process's identity: a Lease it holds is not followed.
	Self string
	// Logger is client-go's logger, for the informer.
	Logger klog.Logger
	// Terminated is called at most once per followed incarnation, with
	// the Lease it held; ctx ends when the Follower stops following.
	Terminated func(ctx context.Context, dead *Incarnation, leaseNamespace, leaseName string)

	mu        sync.Mutex
	following *Incarnation
	cancel    context.CancelFunc
	done      chan struct{}
}

// Follow watches the pod of lease's holder, unless it already does; a
// Lease without a usable annotation, or held by Self, stops the watch.
func (f *Follower) Follow(ctx context.Context, lease *coordinationv1.Lease) {
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	inc, ok := ParseHolder(lease.Annotations, holder)
	if !ok || holder == f.Self {
		f.Stop()
		return
	}
	f.mu.Lock()
	if f.following != nil && *f.following == *inc {
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	f.Stop()

	watchCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	f.mu.Lock()
	f.following, f.cancel, f.done = inc, cancel, done
	f.mu.Unlock()
	go func() {
		defer close(done)
		f.run(watchCtx, inc, lease.Namespace, lease.Name)
	}()
}

// Stop ends the watch, if any, and waits for it.
func (f *Follower) Stop() {
	f.mu.Lock()
	cancel, done := f.cancel, f.done
	f.following, f.cancel, f.done = nil, nil, nil
	f.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// run informs on the one pod (a metadata.name field selector) until ctx is
// done or the process was reported terminated.
func (f *Follower) run(ctx context.Context, inc *Incarnation, leaseNamespace, leaseName string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lw := kubeclient.ListWatch(f.Client, f.Client.CoreV1().Pods(inc.Namespace), kubeclient.Named(inc.Pod))
	var once sync.Once
	onPod := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !inc.TerminatedIn(pod) {
			return
		}
		once.Do(func() {
			f.Terminated(ctx, inc, leaseNamespace, leaseName)
			cancel()
		})
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger:        &f.Logger,
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

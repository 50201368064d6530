package controller

import (
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/kubeclient"
)

// ChildInformers are the informers of the operator's children: the
// Kubernetes objects that carry the resource id label, trimmed by
// TrimForCache. There is one per kind, made by the first Lister that asks
// for it. It does for the children what client-go's informer factory
// would, without linking the informers of every API group
// (pkg/kubeclient).
type ChildInformers struct {
	kube kubeclient.Interface

	mu           sync.Mutex
	informers    map[reflect.Type]cache.SharedIndexInformer
	started      map[reflect.Type]bool
	shuttingDown bool
	running      sync.WaitGroup
}

func newChildInformers(kube kubeclient.Interface) *ChildInformers {
	return &ChildInformers{kube: kube, informers: map[reflect.Type]cache.SharedIndexInformer{}, started: map[reflect.Type]bool{}}
}

// childInformer is f's informer of obj's kind, made over c with indexers
// if f has none yet. The children are found by name, the store's key, so
// none has the namespace index (a set of every key, per namespace) unless
// indexers asks for it.
func childInformer[L runtime.Object](f *ChildInformers, obj runtime.Object, c kubeclient.ListerWatcher[L], indexers cache.Indexers) cache.SharedIndexInformer {
	f.mu.Lock()
	defer f.mu.Unlock()
	kind := reflect.TypeOf(obj)
	if inf, ok := f.informers[kind]; ok {
		// Made by another Lister first: it gets the indexes asked for
		// too. Only a stopped informer refuses, and then the index's
		// reads say so.
		for name, index := range indexers {
			_ = EnsureIndex(inf, name, index)
		}
		return inf
	}
	inf := cache.NewSharedIndexInformerWithOptions(kubeclient.ListWatch(f.kube, c, onlyChildren), obj,
		cache.SharedIndexInformerOptions{Indexers: indexers})
	_ = inf.SetTransform(TrimForCache) // only a running informer refuses
	f.informers[kind] = inf
	return inf
}

// Start runs every informer not yet running until stop is closed.
func (f *ChildInformers) Start(stop <-chan struct{}) {
	ctx := wait.ContextForChannel(stop)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shuttingDown {
		return
	}
	for kind, inf := range f.informers {
		if !f.started[kind] {
			f.running.Go(func() { inf.RunWithContext(ctx) })
			f.started[kind] = true
		}
	}
}

// WaitForCacheSync waits until every started informer has synced or stop
// is closed, and reports which have.
func (f *ChildInformers) WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool {
	f.mu.Lock()
	started := map[reflect.Type]cache.SharedIndexInformer{}
	for kind, inf := range f.informers {
		if f.started[kind] {
			started[kind] = inf
		}
	}
	f.mu.Unlock()
	checkers := make([]cache.DoneChecker, 0, len(started))
	for _, inf := range started {
		checkers = append(checkers, inf.HasSyncedChecker())
	}
	cache.WaitFor(wait.ContextForChannel(stop), "", checkers...)
	synced := make(map[reflect.Type]bool, len(started))
	for kind, inf := range started {
		synced[kind] = inf.HasSynced()
	}
	return synced
}

// Shutdown waits for the informers to stop (their stop channel closed)
// and starts no more.
func (f *ChildInformers) Shutdown() {
	f.mu.Lock()
	f.shuttingDown = true
	f.mu.Unlock()
	f.running.Wait()
}

// onlyChildren lists the Kubernetes objects that carry the resource id
// label.
func onlyChildren(lo *metav1.ListOptions) { lo.LabelSelector = children.ResourceIDLabel }

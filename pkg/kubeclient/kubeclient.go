// Package kubeclient holds the operator's clients of the Kubernetes API
// groups it reads and writes, and the list-watch its informers make over
// them.
//
// client-go's Clientset (and its informer factory) link the typed clients,
// apply configurations, informers and listers of every API group, about
// fifty, into a binary that uses five. Most of a Go binary's pages end up
// resident, called or not (docs/benchmarks.md, "Where the controllers'
// memory goes"), so each of those groups costs memory in every replica.
package kubeclient

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	appsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	networkingv1 "k8s.io/client-go/kubernetes/typed/networking/v1"
	rbacv1 "k8s.io/client-go/kubernetes/typed/rbac/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is the subset of client-go's kubernetes.Interface the operator
// uses; client-go's Clientset and its fake both satisfy it.
type Interface interface {
	CoreV1() corev1.CoreV1Interface
	AppsV1() appsv1.AppsV1Interface
	CoordinationV1() coordinationv1.CoordinationV1Interface
	NetworkingV1() networkingv1.NetworkingV1Interface
	RbacV1() rbacv1.RbacV1Interface
}

// Clients are the typed clients of Interface, over one HTTP client.
type Clients struct {
	core         *corev1.CoreV1Client
	apps         *appsv1.AppsV1Client
	coordination *coordinationv1.CoordinationV1Client
	networking   *networkingv1.NetworkingV1Client
	rbac         *rbacv1.RbacV1Client
}

func (c *Clients) CoreV1() corev1.CoreV1Interface { return c.core }

func (c *Clients) AppsV1() appsv1.AppsV1Interface { return c.apps }

func (c *Clients) CoordinationV1() coordinationv1.CoordinationV1Interface { return c.coordination }

func (c *Clients) NetworkingV1() networkingv1.NetworkingV1Interface { return c.networking }

func (c *Clients) RbacV1() rbacv1.RbacV1Interface { return c.rbac }

// NewForConfig returns the clients of cfg as kubernetes.NewForConfig
// would: one HTTP client (and connection pool) for every group, and one
// rate limiter when cfg has a QPS or a limiter (without either, each group
// makes client-go's default, as the Clientset's do).
func NewForConfig(cfg *rest.Config) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	c := &Clients{}
	if c.core, err = corev1.NewForConfigAndClient(cfg, httpClient); err != nil {
		return nil, err
	}
	if c.apps, err = appsv1.NewForConfigAndClient(cfg, httpClient); err != nil {
		return nil, err
	}
	if c.coordination, err = coordinationv1.NewForConfigAndClient(cfg, httpClient); err != nil {
		return nil, err
	}
	if c.networking, err = networkingv1.NewForConfigAndClient(cfg, httpClient); err != nil {
		return nil, err
	}
	if c.rbac, err = rbacv1.NewForConfigAndClient(cfg, httpClient); err != nil {
		return nil, err
	}
	return c, nil
}

// Named narrows a list or watch to the one object called name (a
// metadata.name field selector): a tweak for ListWatch.
func Named(name string) func(*metav1.ListOptions) {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	return func(o *metav1.ListOptions) { o.FieldSelector = selector }
}

// ListerWatcher is what a typed resource client (Secrets(namespace),
// Deployments(namespace), ...) offers an informer.
type ListerWatcher[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// ListWatch lists and watches with c, each request's options first passed
// to tweak (when not nil), as client-go's generated informers do. client is
// the Interface c came from: a fake one has no watch-list semantics, which
// the reflector must know.
func ListWatch[L runtime.Object](client Interface, c ListerWatcher[L], tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	options := func(o metav1.ListOptions) metav1.ListOptions {
		if tweak != nil {
			tweak(&o)
		}
		return o
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, options(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, options(o))
		},
	}, client)
}

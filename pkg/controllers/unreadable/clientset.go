package unreadable

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned/scheme"
	typed "github.com/materializeinc/orchestratord/pkg/client/clientset/versioned/typed/materialize/v1alpha1"
)

// Clientset is c whose List and Watch of Materializes, Balancers and
// Consoles (v1alpha1) read each object on its own: the informers' client.
// Everything else is c's. A fake clientset, which holds typed objects
// already and has no REST client, is returned as it is; any client with
// one, however wrapped, is read through it.
func Clientset(c versioned.Interface) versioned.Interface {
	if rc, ok := c.MaterializeV1alpha1().RESTClient().(*rest.RESTClient); !ok || rc == nil {
		return c
	}
	return clientset{c}
}

type clientset struct{ versioned.Interface }

func (c clientset) MaterializeV1alpha1() typed.MaterializeV1alpha1Interface {
	return group{c.Interface.MaterializeV1alpha1()}
}

type group struct {
	typed.MaterializeV1alpha1Interface
}

func newReader[T Object](g group, resource, namespace string, newObject func() T) reader[T] {
	return reader[T]{client: g.RESTClient(), resource: resource, namespace: namespace,
		decoder: scheme.Codecs.UniversalDeserializer(), newObject: newObject}
}

func (g group) Materializes(namespace string) typed.MaterializeInterface {
	return materializes{g.MaterializeV1alpha1Interface.Materializes(namespace),
		newReader(g, "materializes", namespace, func() *v1alpha1.Materialize { return &v1alpha1.Materialize{} })}
}

func (g group) Balancers(namespace string) typed.BalancerInterface {
	return balancers{g.MaterializeV1alpha1Interface.Balancers(namespace),
		newReader(g, "balancers", namespace, func() *v1alpha1.Balancer { return &v1alpha1.Balancer{} })}
}

func (g group) Consoles(namespace string) typed.ConsoleInterface {
	return consoles{g.MaterializeV1alpha1Interface.Consoles(namespace),
		newReader(g, "consoles", namespace, func() *v1alpha1.Console { return &v1alpha1.Console{} })}
}

// values are the list's items as a typed list holds them.
func values[T any](items []*T) []T {
	out := make([]T, len(items))
	for i, item := range items {
		out[i] = *item
	}
	return out
}

type materializes struct {
	typed.MaterializeInterface
	r reader[*v1alpha1.Materialize]
}

func (m materializes) List(ctx context.Context, opts metav1.ListOptions) (*v1alpha1.MaterializeList, error) {
	items, meta, err := m.r.list(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &v1alpha1.MaterializeList{ListMeta: meta, Items: values(items)}, nil
}

func (m materializes) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return m.r.watch(ctx, opts)
}

type balancers struct {
	typed.BalancerInterface
	r reader[*v1alpha1.Balancer]
}

func (b balancers) List(ctx context.Context, opts metav1.ListOptions) (*v1alpha1.BalancerList, error) {
	items, meta, err := b.r.list(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &v1alpha1.BalancerList{ListMeta: meta, Items: values(items)}, nil
}

func (b balancers) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return b.r.watch(ctx, opts)
}

type consoles struct {
	typed.ConsoleInterface
	r reader[*v1alpha1.Console]
}

func (c consoles) List(ctx context.Context, opts metav1.ListOptions) (*v1alpha1.ConsoleList, error) {
	items, meta, err := c.r.list(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &v1alpha1.ConsoleList{ListMeta: meta, Items: values(items)}, nil
}

func (c consoles) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.r.watch(ctx, opts)
}

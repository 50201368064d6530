package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	mzinformers "github.com/materializeinc/orchestratord/pkg/client/informers/externalversions"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
)

// NewInformerFactories returns the informer factories every reconciler
// reads from (Deps): Kubernetes objects only if they carry the resource id
// label (the operator's children: memory does not grow with the cluster),
// every custom resource, each trimmed by TrimForCache.
func NewInformerFactories(kube kubernetes.Interface, mz versioned.Interface) (informers.SharedInformerFactory, mzinformers.SharedInformerFactory) {
	return informers.NewSharedInformerFactoryWithOptions(kube, 0,
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = children.ResourceIDLabel }),
			informers.WithTransform(TrimForCache)),
		mzinformers.NewSharedInformerFactoryWithOptions(mz, 0, mzinformers.WithTransform(TrimForCache))
}

// TrimForCache is the informers' transform: it drops, before an object is
// cached, the managedFields entries of every manager but this operator's.
// The no-op check reads only this operator's entries (apply.Object); the
// others (kube-controller-manager's status updates, a user's kubectl) are
// most of the rest and, with server-side apply, a large share of each
// cached object. Objects that are not Kubernetes objects (a tombstone)
// pass through.
func TrimForCache(obj any) (any, error) {
	o, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil
	}
	entries := o.GetManagedFields()
	kept := entries[:0]
	for _, e := range entries {
		if e.Manager == apply.FieldManager {
			kept = append(kept, e)
		}
	}
	if len(kept) < len(entries) {
		// A fresh slice: the dropped entries' fieldsV1 must not stay
		// reachable through the old backing array.
		o.SetManagedFields(append(kept[:0:0], kept...))
	}
	return obj, nil
}

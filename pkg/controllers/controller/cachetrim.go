package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
)

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

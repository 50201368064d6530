package apply

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/materializeinc/orchestratord/pkg/certificates"
)

// CertificateRecheck is how soon the owner of a Certificate is reconciled
// again when nothing else brings it. Certificates are read by name, not
// watched (cert-manager may be absent, and a cache would hold every one),
// so one deleted or edited by hand is applied again within it, long
// before its Secret's certificate could expire; upstream watches them.
// A variable for tests, set before any controller starts.
var CertificateRecheck = time.Hour

// WithinCertificateRecheck is after, or CertificateRecheck less up to a
// tenth (so that owners reconciled together do not come back together)
// when that is sooner or after is zero (no requeue).
func WithinCertificateRecheck(after time.Duration) time.Duration {
	recheck := CertificateRecheck - rand.N(CertificateRecheck/10+1)
	if after <= 0 || after > recheck {
		return recheck
	}
	return after
}

// Certificate applies a cert-manager Certificate unless the fields this
// operator applied to the live one are exactly the desired ones. Certificates are read from the API
// server, not an informer: cert-manager may not be installed, and only
// environments that ask for TLS have any. Without cert-manager the error
// says so.
func Certificate(ctx context.Context, dyn dynamic.Interface, cert *unstructured.Unstructured) error {
	client := dyn.Resource(certificates.GVR).Namespace(cert.GetNamespace())
	live, err := client.Get(ctx, cert.GetName(), metav1.GetOptions{})
	exists := err == nil
	switch {
	case meta.IsNoMatchError(err) || isMissingResource(err):
		return fmt.Errorf("certificate %s: cert-manager's Certificate API (cert-manager.io/v1) is not installed: install cert-manager or remove the issuerRef", cert.GetName())
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("reading certificate %s: %w", cert.GetName(), err)
	}
	if exists {
		if ref := metav1.GetControllerOfNoCopy(live); ref != nil {
			for _, own := range cert.GetOwnerReferences() {
				if own.Controller != nil && *own.Controller && own.UID != ref.UID {
					return fmt.Errorf("certificate %s is controlled by %s %s, not by this object", cert.GetName(), ref.Kind, ref.Name)
				}
			}
		}
	}
	_, err = Object(ctx, live, exists, cert, ownedFields,
		func(ctx context.Context, obj *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error) {
			return client.Apply(ctx, obj.GetName(), obj, opts)
		})
	if err != nil {
		return fmt.Errorf("applying certificate %s: %w", cert.GetName(), err)
	}
	return nil
}

// ownedFields is the part of a live object the manager applied: compared
// with the desired object, a field removed from the spec counts as a
// change. The schema is deduced (maps by key, lists atomic), as for the
// CRDs.
func ownedFields(live *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
	owned := map[string]any{}
	if err := managedfields.ExtractInto(live, typed.DeducedParseableType, manager, &owned, ""); err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{Object: owned}
	out.SetAPIVersion(live.GetAPIVersion())
	out.SetKind(live.GetKind())
	out.SetName(live.GetName())
	out.SetNamespace(live.GetNamespace())
	return out, nil
}

// isMissingResource is the API server's answer for a resource it does not
// serve: 404 naming no object.
func isMissingResource(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}

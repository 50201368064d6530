package component

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/certificates"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/podspec"
	"github.com/materializeinc/orchestratord/pkg/controllers/recent"
	"github.com/materializeinc/orchestratord/pkg/kubeclient"
)

// Workload is a component's Deployment and Service.
type Workload struct {
	Deployment Child[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration]
	// Selector is the Deployment's desired selector.
	Selector map[string]string
	Service  Child[*corev1.Service, *corev1ac.ServiceApplyConfiguration]
}

// Apply applies the Deployment and the Service, first replacing what cannot
// change in place (FixSelector, FixHeadless). It returns the Deployment as
// it now is, or a positive requeue while a replacement is under way.
func (w Workload) Apply(ctx context.Context, kube kubeclient.Interface, r *recent.Writes, owner Object, ownerKey string) (*appsv1.Deployment, time.Duration, error) {
	live, err := w.Deployment.Cached(w.Deployment.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, 0, err
	}
	fixed, requeue, err := FixSelector(ctx, kube, owner, live, err == nil, w.Selector, w.Deployment.Desired.Spec.Template)
	if !fixed || err != nil {
		return nil, requeue, err
	}
	dep, err := w.Deployment.Apply(ctx, r, owner, ownerKey)
	if err != nil {
		return nil, 0, err
	}
	svc, err := w.Service.Cached(w.Service.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, 0, err
	}
	if fixed, requeue, err := FixHeadless(ctx, kube, owner, svc, err == nil); !fixed || err != nil {
		return nil, requeue, err
	}
	if _, err := w.Service.Apply(ctx, r, owner, ownerKey); err != nil {
		return nil, 0, err
	}
	return dep, 0, nil
}

// ExternalCertificateSecret is the Secret cert-manager writes app's external
// certificate to (upstream's mz{id}-{app}-external-tls).
func ExternalCertificateSecret(id, app string) string { return children.Name(id, app+"-external-tls") }

// ApplyExternalCertificate applies app's external Certificate (upstream's
// mz{id}-{app}-external, ECDSA 256 unless the spec asks otherwise) when an
// issuer is named by spec or defaults; applied says whether there is one
// (apply.CertificateRecheck).
func ApplyExternalCertificate(ctx context.Context, dyn dynamic.Interface, defaults, spec *certificates.Spec,
	owner Object, gvk schema.GroupVersionKind, id, app string, lbls podspec.Labels,
) (applied bool, err error) {
	cert, err := certificates.Certificate(defaults, spec, certificates.Request{
		Name: children.Name(id, app+"-external"), Namespace: owner.GetNamespace(),
		SecretName: ExternalCertificateSecret(id, app),
		Labels:     lbls.Object(), SecretLabels: lbls.Default,
		OwnerReferences: children.UnstructuredOwner(owner, gvk),
		AlgorithmHint:   v1alpha1.PrivateKeyECDSA, SizeHint: 256,
	})
	if err != nil {
		return false, SpecError{Err: err}
	}
	if cert == nil {
		return false, nil
	}
	return true, apply.Certificate(ctx, dyn, cert)
}

package materialize

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/certificates"
	mzac "github.com/materializeinc/orchestratord/pkg/client/applyconfiguration/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/pkg/imageref"
)

// activeImage is the environmentd image of the last completed rollout (the
// spec's until one completes): balancerd and console follow what runs, not
// what is requested, as upstream's active_environmentd_image_ref.
func activeImage(e env) string {
	if ref := e.mz.Status.LastCompletedRolloutEnvironmentdImageRef; ref != "" {
		return ref
	}
	return e.mz.Spec.EnvironmentdImageRef
}

// consoleImage is upstream's: the console from the active environmentd
// image's repository path, tagged by --console-image-tag-map for the
// environmentd tag (first match), else --console-image-tag-default, else
// the environmentd tag itself.
func (e env) consoleImage() string {
	active := activeImage(e)
	envTag, ok := imageref.Tag(active)
	if !ok {
		envTag = "latest"
	}
	tag := e.cfg.ConsoleImageTagDefault
	for _, kv := range mustKeyValues(e.cfg.ConsoleImageTagMap) {
		if kv.key == envTag {
			tag = kv.value
			break
		}
	}
	return imageref.Sibling(active, "console", tag)
}

func certAC(c *v1alpha1.MaterializeCertSpec) *mzac.MaterializeCertSpecApplyConfiguration {
	if c == nil {
		return nil
	}
	ac := mzac.MaterializeCertSpec().WithDNSNames(c.DNSNames...)
	if c.Duration != "" {
		ac.WithDuration(c.Duration)
	}
	if c.RenewBefore != "" {
		ac.WithRenewBefore(c.RenewBefore)
	}
	if c.IssuerRef != nil {
		// Upstream leaves an unset kind or group out: written as "", it
		// would make every switch between the operators rewrite the spec.
		ref := mzac.CertificateIssuerRef().WithName(c.IssuerRef.Name)
		if c.IssuerRef.Kind != "" {
			ref.WithKind(c.IssuerRef.Kind)
		}
		if c.IssuerRef.Group != "" {
			ref.WithGroup(c.IssuerRef.Group)
		}
		ac.WithIssuerRef(ref)
	}
	if c.SecretTemplate != nil {
		ac.WithSecretTemplate(mzac.CertificateSecretTemplate().WithAnnotations(c.SecretTemplate.Annotations).WithLabels(c.SecretTemplate.Labels))
	}
	if c.PrivateKeyAlgorithm != "" {
		ac.WithPrivateKeyAlgorithm(c.PrivateKeyAlgorithm)
	}
	if c.PrivateKeySize != nil {
		ac.WithPrivateKeySize(*c.PrivateKeySize)
	}
	return ac
}

// replicas is upstream's balancerd_replicas/console_replicas: 2 unless set.
func replicas(n *int32) int32 {
	if n == nil {
		return 2
	}
	return *n
}

func (e env) balancer(image string) *mzac.BalancerApplyConfiguration {
	spec := mzac.BalancerSpec().
		WithBalancerdImageRef(image).
		WithResourceID(e.id).
		WithReplicas(replicas(e.mz.Spec.BalancerdReplicas)).
		WithStaticRouting(mzac.StaticRoutingConfig().WithEnvironmentdNamespace(e.ns()).WithEnvironmentdServiceName(e.environmentdName()))
	if r := e.mz.Spec.BalancerdResourceRequirements; r != nil {
		spec.WithResourceRequirements(*r)
	}
	if c := certAC(e.mz.Spec.BalancerdExternalCertificateSpec); c != nil {
		spec.WithExternalCertificateSpec(c)
	}
	if c := certAC(e.mz.Spec.InternalCertificateSpec); c != nil {
		spec.WithInternalCertificateSpec(c)
	}
	if len(e.mz.Spec.PodAnnotations) > 0 {
		spec.WithPodAnnotations(e.mz.Spec.PodAnnotations)
	}
	if len(e.mz.Spec.PodLabels) > 0 {
		spec.WithPodLabels(e.mz.Spec.PodLabels)
	}
	return mzac.Balancer(e.mz.Name, e.ns()).WithLabels(e.labels()).WithOwnerReferences(e.owner()).WithSpec(spec)
}

func (e env) console(image string) *mzac.ConsoleApplyConfiguration {
	auth := e.mz.Spec.AuthenticatorKind
	if auth == "" {
		auth = v1alpha1.AuthenticatorNone
	}
	// The console reaches balancerd over https by its certificate's names
	// when balancerd has an external certificate.
	defaults := e.cfg.Certificates().BalancerdExternal
	balancerd := mzac.BalancerdRef().WithServiceName(children.Name(e.id, "balancerd")).WithNamespace(e.ns()).WithScheme(v1alpha1.SchemeHTTP)
	if certificates.IssuerRefDefined(defaults, e.mz.Spec.BalancerdExternalCertificateSpec) {
		balancerd.WithScheme(v1alpha1.SchemeHTTPS)
	}
	if names := certificates.ResolvedDNSNames(defaults, e.mz.Spec.BalancerdExternalCertificateSpec); names != nil {
		balancerd.WithDNSNames(names...)
	}
	spec := mzac.ConsoleSpec().
		WithConsoleImageRef(image).
		WithResourceID(e.id).
		WithReplicas(replicas(e.mz.Spec.ConsoleReplicas)).
		WithAuthenticatorKind(auth).
		WithBalancerd(balancerd)
	if r := e.mz.Spec.ConsoleResourceRequirements; r != nil {
		spec.WithResourceRequirements(*r)
	}
	if c := certAC(e.mz.Spec.ConsoleExternalCertificateSpec); c != nil {
		spec.WithExternalCertificateSpec(c)
	}
	if len(e.mz.Spec.PodAnnotations) > 0 {
		spec.WithPodAnnotations(e.mz.Spec.PodAnnotations)
	}
	if len(e.mz.Spec.PodLabels) > 0 {
		spec.WithPodLabels(e.mz.Spec.PodLabels)
	}
	return mzac.Console(e.mz.Name, e.ns()).WithLabels(e.labels()).WithOwnerReferences(e.owner()).WithSpec(spec)
}

// applyComponents applies (or, when disabled, deletes) the environment's
// Balancer and Console. As upstream, the Console waits for the Balancer to
// be Ready: it sends its API requests there. Upstream polls the Balancer
// every second; here its status write, which the Balancer informer passes
// to its owner, brings the next pass, so a Balancer that never gets Ready
// (an image that does not start) costs nothing while it waits.
func (r *reconciler) applyComponents(ctx context.Context, e env) (controller.Result, error) {
	ns, name := e.ns(), e.mz.Name
	balancers := r.d.MZ.MaterializeV1alpha1().Balancers(ns)
	liveB, err := r.balancers.Balancers(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return controller.Result{}, err
	}
	exists := err == nil && ownedBy(liveB, e.mz)
	switch {
	case r.o.CreateBalancers:
		image := r.o.BalancerdImage
		if image == "" {
			image = imageref.Sibling(activeImage(e), "balancerd", "")
		}
		if _, err := apply.Object(ctx, liveB, exists, e.balancer(image), controller.ExtractBalancer, balancers.Apply); err != nil {
			return controller.Result{}, fmt.Errorf("balancer: %w", err)
		}
		if !exists || !meta.IsStatusConditionTrue(liveB.Status.Conditions, "Ready") {
			return controller.Result{}, nil
		}
	case exists:
		if err := balancers.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return controller.Result{}, err
		}
	}

	consoles := r.d.MZ.MaterializeV1alpha1().Consoles(ns)
	liveC, err := r.consoles.Consoles(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return controller.Result{}, err
	}
	exists = err == nil && ownedBy(liveC, e.mz)
	switch {
	case r.o.CreateConsoles:
		image := r.o.ConsoleImage
		if image == "" {
			image = e.consoleImage()
		}
		if _, err := apply.Object(ctx, liveC, exists, e.console(image), controller.ExtractConsole, consoles.Apply); err != nil {
			return controller.Result{}, fmt.Errorf("console: %w", err)
		}
	case exists:
		if err := consoles.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return controller.Result{}, err
		}
	}
	return controller.Result{}, nil
}

// ownedBy tells whether obj has an owner reference to owner, controlling
// (this operator's) or not (upstream's, which sets no controller).
func ownedBy(obj, owner metav1.Object) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

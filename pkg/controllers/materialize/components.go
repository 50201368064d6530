package materialize

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzac "github.com/materializeinc/orchestratord/pkg/client/applyconfiguration/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/imageref"
)

// The operator's fields of the Balancer and Console it applied, so a field
// removed from the Materialize is removed from them too.
var (
	extractBalancer = apply.ExtractDeduced[*v1alpha1.Balancer](mzac.Balancer)
	extractConsole  = apply.ExtractDeduced[*v1alpha1.Console](mzac.Console)
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
		ac.WithIssuerRef(mzac.CertificateIssuerRef().WithName(c.IssuerRef.Name).WithKind(c.IssuerRef.Kind).WithGroup(c.IssuerRef.Group))
	}
	if c.SecretTemplate != nil {
		ac.WithSecretTemplate(mzac.CertificateSecretTemplate().WithAnnotations(c.SecretTemplate.Annotations).WithLabels(c.SecretTemplate.Labels))
	}
	return ac
}

func (e env) balancer(image string) *mzac.BalancerApplyConfiguration {
	spec := mzac.BalancerSpec().
		WithBalancerdImageRef(image).
		WithResourceID(e.id).
		WithStaticRouting(mzac.StaticRoutingConfig().WithEnvironmentdNamespace(e.ns()).WithEnvironmentdServiceName(e.environmentdName()))
	if e.mz.Spec.BalancerdReplicas != nil {
		spec.WithReplicas(*e.mz.Spec.BalancerdReplicas)
	}
	if r := e.mz.Spec.BalancerdResourceRequirements; r != nil {
		spec.WithResourceRequirements(*r)
	}
	if c := certAC(e.mz.Spec.BalancerdExternalCertificateSpec); c != nil {
		spec.WithExternalCertificateSpec(c)
	}
	if c := certAC(e.mz.Spec.InternalCertificateSpec); c != nil {
		spec.WithInternalCertificateSpec(c)
	}
	return mzac.Balancer(e.mz.Name, e.ns()).WithLabels(e.labels()).WithOwnerReferences(e.owner()).WithSpec(spec)
}

func (e env) console(image string) *mzac.ConsoleApplyConfiguration {
	auth := e.mz.Spec.AuthenticatorKind
	if auth == "" {
		auth = v1alpha1.AuthenticatorNone
	}
	spec := mzac.ConsoleSpec().
		WithConsoleImageRef(image).
		WithResourceID(e.id).
		WithAuthenticatorKind(auth).
		WithBalancerd(mzac.BalancerdRef().WithServiceName(children.Name(e.id, "balancerd")).WithNamespace(e.ns()).WithScheme(v1alpha1.SchemeHTTP))
	if e.mz.Spec.ConsoleReplicas != nil {
		spec.WithReplicas(*e.mz.Spec.ConsoleReplicas)
	}
	if r := e.mz.Spec.ConsoleResourceRequirements; r != nil {
		spec.WithResourceRequirements(*r)
	}
	if c := certAC(e.mz.Spec.ConsoleExternalCertificateSpec); c != nil {
		spec.WithExternalCertificateSpec(c)
	}
	return mzac.Console(e.mz.Name, e.ns()).WithLabels(e.labels()).WithOwnerReferences(e.owner()).WithSpec(spec)
}

// applyComponents applies (or, when disabled, deletes) the environment's
// Balancer and Console.
func (r *reconciler) applyComponents(ctx context.Context, e env) error {
	ns, name := e.ns(), e.mz.Name
	balancers := r.d.MZ.MaterializeV1alpha1().Balancers(ns)
	liveB, err := r.balancers.Balancers(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	exists := err == nil && metav1.IsControlledBy(liveB, e.mz)
	switch {
	case r.o.CreateBalancers:
		image := r.o.BalancerdImage
		if image == "" {
			image = imageref.Sibling(activeImage(e), "balancerd", "")
		}
		if _, err := apply.Object(ctx, liveB, exists, e.balancer(image), extractBalancer, balancers.Apply); err != nil {
			return fmt.Errorf("balancer: %w", err)
		}
	case exists:
		if err := balancers.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}

	consoles := r.d.MZ.MaterializeV1alpha1().Consoles(ns)
	liveC, err := r.consoles.Consoles(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	exists = err == nil && metav1.IsControlledBy(liveC, e.mz)
	switch {
	case r.o.CreateConsoles:
		image := r.o.ConsoleImage
		if image == "" {
			image = e.consoleImage()
		}
		if _, err := apply.Object(ctx, liveC, exists, e.console(image), extractConsole, consoles.Apply); err != nil {
			return fmt.Errorf("console: %w", err)
		}
	case exists:
		if err := consoles.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

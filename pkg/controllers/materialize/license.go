package materialize

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/boundedtext"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize/rollout"
	"github.com/materializeinc/orchestratord/pkg/licensekey"
)

// ConditionLicenseKey is this operator's own condition (upstream has none):
// the license key in the backend Secret as environmentd will judge it at its
// next start, kept up to date between rollouts, so an expiry is read here
// and not learnt from a crash loop. Upstream ignores condition types it
// does not know; the condition carries the current metadata.generation, as
// upstream's conditions_need_update expects of every condition.
const ConditionLicenseKey = "LicenseKey"

// LicenseKey condition reasons.
const (
	ReasonLicenseValid    = "Valid"
	ReasonLicenseExpiring = "ExpiringSoon"
	ReasonLicenseExpired  = "Expired"
	ReasonLicenseInvalid  = "Invalid"
)

// licenseWarning is how long before its expiry a license key is warned of.
const licenseWarning = 30 * 24 * time.Hour

// maxLicenseRecheck bounds how far ahead a recheck is scheduled: a key
// valid for decades would otherwise leave a timer of that length in the
// work queue, and a reconcile a day is nothing.
const maxLicenseRecheck = 24 * time.Hour

// licenseState is the LicenseKey condition a reconcile sets, and when the
// condition changes next by the clock alone (zero: never).
type licenseState struct {
	cond    *metav1.Condition
	recheck time.Duration
}

// backendSecret is one reconcile's read of the backend Secret.
type backendSecret struct {
	secret *corev1.Secret
	err    error
}

func (r *reconciler) readBackendSecret(ctx context.Context, mz *v1alpha1.Materialize) backendSecret {
	name := mz.Spec.BackendSecretName
	if !validObjectName(name) {
		// No such Secret can exist; the client would refuse the request
		// with an error that is not NotFound, retried for ever.
		return backendSecret{err: apierrors.NewNotFound(corev1.Resource("secrets"), name)}
	}
	secret, err := r.d.Kube.CoreV1().Secrets(mz.Namespace).Get(ctx, name, metav1.GetOptions{})
	return backendSecret{secret, err}
}

// secretForbidden says that RBAC keeps the operator from reading a
// Materialize's backend Secret. The chart grants the read in every
// namespace, or in controllers.secretNamespaces only when that is set.
func secretForbidden(namespace, name string) string {
	return fmt.Sprintf("the operator may not read Secrets in namespace %q, so not backend Secret %q: grant it get on Secrets there "+
		"(with the chart: list the namespace in controllers.secretNamespaces, when that is set)", namespace, name)
}

// validObjectName reports whether name can name a Secret or ConfigMap: a
// tenant's spec may hold any string ("a/b", "..", a megabyte).
func validObjectName(name string) bool {
	return len(validation.IsDNS1123Subdomain(name)) == 0
}

// licenseKeyState reads the backend Secret's license key. An error reading
// the Secret other than its absence leaves the condition as it is: a
// passing API problem is not a licence problem.
func (r *reconciler) licenseKeyState(ctx context.Context, mz *v1alpha1.Materialize, backend backendSecret) licenseState {
	now := r.o.Now()
	cond := func(status metav1.ConditionStatus, reason, format string, args ...any) *metav1.Condition {
		return &metav1.Condition{Type: ConditionLicenseKey, Status: status, Reason: reason,
			// The Secret's name and the key's claims are the tenant's.
			Message:            boundedtext.Cut(fmt.Sprintf(format, args...), rollout.MaxMessageBytes),
			ObservedGeneration: mz.Generation, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}
	}
	name := mz.Spec.BackendSecretName
	secret, err := backend.secret, backend.err
	switch {
	case apierrors.IsNotFound(err):
		return licenseState{cond: cond(metav1.ConditionFalse, ReasonLicenseInvalid, "backend Secret %q does not exist", name)}
	case apierrors.IsForbidden(err):
		// As good as missing, to the operator: a condition left as it was
		// would say a key is valid that nothing checks any more.
		return licenseState{cond: cond(metav1.ConditionFalse, ReasonLicenseInvalid, "%s", secretForbidden(mz.Namespace, name))}
	case err != nil:
		controller.Logger(ctx, r.d.Log).Info("license key not checked", zap.String("materialize", mz.Namespace+"/"+mz.Name), zap.Error(err))
		return licenseState{}
	}
	raw := secret.Data[LicenseKeyEntry]
	if len(raw) == 0 {
		return licenseState{cond: cond(metav1.ConditionFalse, ReasonLicenseInvalid, "backend Secret %q has no %q entry", name, LicenseKeyEntry)}
	}
	claims, err := licensekey.Read(raw)
	if err != nil {
		return licenseState{cond: cond(metav1.ConditionFalse, ReasonLicenseInvalid,
			"backend Secret %q: %q is not a license key environmentd accepts: %v", name, LicenseKeyEntry, err)}
	}
	expires := claims.ExpiresAt()
	at := expires.UTC().Format(time.RFC3339)
	switch {
	case !now.Before(expires):
		consequence := "environmentd keeps running with a warning"
		if claims.ExpirationBehavior == licensekey.Disable {
			consequence = "environmentd refuses to start"
		}
		return licenseState{cond: cond(metav1.ConditionFalse, ReasonLicenseExpired,
			"the license key in backend Secret %q expired at %s; with expiration_behavior %s %s", name, at, claims.ExpirationBehavior, consequence)}
	case !now.Add(licenseWarning).Before(expires):
		return licenseState{
			cond: cond(metav1.ConditionTrue, ReasonLicenseExpiring, "the license key in backend Secret %q expires at %s (expiration_behavior %s)",
				name, at, claims.ExpirationBehavior),
			recheck: min(expires.Sub(now), maxLicenseRecheck),
		}
	default:
		return licenseState{
			cond:    cond(metav1.ConditionTrue, ReasonLicenseValid, "the license key in backend Secret %q expires at %s", name, at),
			recheck: min(expires.Add(-licenseWarning).Sub(now), maxLicenseRecheck),
		}
	}
}

// licenseEvent records an Event when the LicenseKey condition written
// changes its reason: once as a key comes within 30 days of its expiry,
// once as it expires, once as it becomes unreadable or valid again.
func (r *reconciler) licenseEvent(mz *v1alpha1.Materialize, before, after v1alpha1.MaterializeStatus) {
	now := meta.FindStatusCondition(after.Conditions, ConditionLicenseKey)
	if now == nil {
		return
	}
	if was := meta.FindStatusCondition(before.Conditions, ConditionLicenseKey); was != nil && was.Reason == now.Reason {
		return
	}
	switch now.Reason {
	case ReasonLicenseExpiring:
		r.d.Recorder.Event(mz, corev1.EventTypeWarning, "LicenseKeyExpiring", now.Message)
	case ReasonLicenseExpired:
		r.d.Recorder.Event(mz, corev1.EventTypeWarning, "LicenseKeyExpired", now.Message)
	case ReasonLicenseInvalid:
		r.d.Recorder.Event(mz, corev1.EventTypeWarning, "LicenseKeyInvalid", now.Message)
	}
}

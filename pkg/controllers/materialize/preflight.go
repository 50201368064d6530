package materialize

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/boundedtext"

	"github.com/materializeinc/orchestratord/pkg/environmentd"
	"github.com/materializeinc/orchestratord/pkg/imageref"
	mzlabels "github.com/materializeinc/orchestratord/pkg/labels"
	"github.com/materializeinc/orchestratord/pkg/licensekey"
	"github.com/materializeinc/orchestratord/pkg/mzuuid"
)

// maxNameShown bounds a name that is not one quoted in a condition.
const maxNameShown = 256

// preflightResult says whether a new generation can start.
type preflightResult struct {
	// problem, when set, is why environmentd would refuse to start or could
	// not be reached: the generation is not created.
	problem string
	// password is mz_system's, for the leader API behind a login.
	password string
}

// preflight checks what environmentd needs before it is started, so that
// bad input shows as a condition instead of a pod that crash-loops. Once
// the generation is created the Secret and ConfigMap checks are behind it:
// a rollout polling environmentd reads only mz_system's password, when it
// needs one, instead of them on every poll.
func (r *reconciler) preflight(ctx context.Context, e env, created bool, backend backendSecret) (preflightResult, error) {
	var res preflightResult
	if _, err := mzuuid.Canonical(e.mz.Spec.EnvironmentID); err != nil && isSet(e.mz.Spec.EnvironmentID) && !created {
		res.problem = fmt.Sprintf("spec.environmentId: %v; environmentd needs the organization's UUID", err)
		return res, nil
	}
	var other *v1alpha1.Materialize
	if !created {
		var err error
		if other, err = r.sharingEnvironmentID(e.mz); err != nil {
			return res, err
		}
	}
	if other != nil {
		// Two environments on one environment ID would share a catalog's
		// identity (and, with one backend, a catalog). Unlike upstream's
		// message, this one names neither the other Materialize nor its
		// namespace: it may be another tenant's.
		res.problem = "spec.environmentId is the environmentId of another Materialize, which keeps it; it must be unique across environments"
		return res, nil
	}
	if !nameIsLabelValue(e.mz.Name) {
		// A DNS subdomain of up to 253 characters, which a label value
		// is not past 63; the API server's refusal of the first child
		// would name the label, not the field to mend.
		res.problem = fmt.Sprintf("metadata.name is %d characters: the operator labels every object of the environment with it (%s), and a label value is at most %d",
			len(e.mz.Name), mzlabels.OrganizationName, validation.LabelValueMaxLength)
		return res, nil
	}
	if res.problem = podLabelsProblem(e.mz.Spec.PodLabels); res.problem != "" {
		return res, nil
	}
	ref := e.mz.Spec.EnvironmentdImageRef
	// The version checks cost no I/O and run on every pass, a generation
	// created or not: an image changed mid-rollout is checked as well.
	if v, _, ok := imageref.EnvironmentdVersion(ref); ok && !v.AtLeast(MinimumEnvironmentdVersion) {
		res.problem = fmt.Sprintf("environmentd %s (image %s) is older than %s, the oldest version this operator runs",
			v, ref, MinimumEnvironmentdVersion)
		return res, nil
	}
	if authenticatorKind(e.mz) == v1alpha1.AuthenticatorOidc && !e.meetsVersion(OidcVersion) {
		v, _, _ := imageref.EnvironmentdVersion(ref)
		res.problem = fmt.Sprintf("authenticatorKind Oidc needs environmentd %s or later; image %s is environmentd %s, which has no Oidc listeners",
			OidcVersion, ref, v)
		return res, nil
	}
	// upstream's within_upgrade_window, with its message (automation may
	// match it): no rollback, at most one major version ahead of what the
	// last completed rollout ran. Versions that do not parse pass, as
	// upstream: environmentd refuses what it cannot upgrade from.
	if last := e.mz.Status.LastCompletedRolloutEnvironmentdImageRef; last != "" {
		active, _, okActive := imageref.EnvironmentdVersion(last)
		next, _, okNext := imageref.EnvironmentdVersion(ref)
		if okActive && okNext && !imageref.ValidUpgrade(active, next) {
			res.problem = fmt.Sprintf("Refusing to upgrade from %s to %s. More than one major version from last successful rollout. "+
				"If coming from Self Managed 25.2, upgrade to materialize/environmentd:v0.147.20 first.", last, ref)
			return res, nil
		}
	}

	needPassword := passwordLike(authenticatorKind(e.mz))
	if created && !needPassword {
		return res, nil
	}
	name := e.mz.Spec.BackendSecretName
	secret, err := backend.secret, backend.err
	switch {
	case !validObjectName(name):
		res.problem = fmt.Sprintf("spec.backendSecretName %q is not a Secret's name (a DNS subdomain of at most 253 characters)", boundedtext.Cut(name, maxNameShown))
		return res, nil
	case apierrors.IsNotFound(err):
		res.problem = fmt.Sprintf("backend Secret %q (spec.backendSecretName) does not exist", name)
		return res, nil
	case apierrors.IsForbidden(err):
		// Retrying would not help: the grant is the cluster admin's.
		res.problem = secretForbidden(e.ns(), name)
		return res, nil
	case err != nil:
		return res, fmt.Errorf("reading backend Secret %q: %w", name, err)
	}
	need := []string{"metadata_backend_url", "persist_backend_url", LicenseKeyEntry}
	if created {
		need = nil
	}
	if needPassword {
		need = append(need, MzSystemPasswordEntry)
	}
	for _, key := range need {
		if len(secret.Data[key]) == 0 {
			res.problem = fmt.Sprintf("backend Secret %q has no %q entry", name, key)
			switch key {
			case LicenseKeyEntry:
				res.problem += ": environmentd refuses to start in Kubernetes without a license key"
			case MzSystemPasswordEntry:
				res.problem += fmt.Sprintf(": authenticatorKind %s needs the password of %s", authenticatorKind(e.mz), environmentd.SystemUser)
			}
			return res, nil
		}
	}
	if needPassword {
		res.password = string(secret.Data[MzSystemPasswordEntry])
	}
	if !created {
		if res.problem = r.checkLicenseKey(e, name, secret.Data[LicenseKeyEntry]); res.problem != "" {
			return res, nil
		}
		if !isSet(e.mz.Spec.EnvironmentID) {
			// Filled from the license key on the next pass.
			res.problem = "spec.environmentId is not set yet; it comes from the license key (a new one for a key for any environment)"
			return res, nil
		}
	}

	if cm := e.mz.Spec.SystemParameterConfigmapName; cm != "" && !created {
		if !validObjectName(cm) {
			res.problem = fmt.Sprintf("spec.systemParameterConfigmapName %q is not a ConfigMap's name (a DNS subdomain of at most 253 characters)", boundedtext.Cut(cm, maxNameShown))
			return res, nil
		}
		_, err := r.d.Kube.CoreV1().ConfigMaps(e.ns()).Get(ctx, cm, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			res.problem = fmt.Sprintf("ConfigMap %q (spec.systemParameterConfigmapName) does not exist; environmentd syncs system parameters from its %q entry", cm, SystemParamsFile)
			return res, nil
		case err != nil:
			return res, fmt.Errorf("reading ConfigMap %q: %w", cm, err)
		}
	}
	return res, nil
}

// leaderURL is where upstream calls a generation's leader API: with
// Password, Sasl or Oidc on the external HTTP port (https with an internal
// certificate), else on the internal HTTP port without authentication.
func (e env) leaderURL(gen uint64) string {
	if passwordLike(authenticatorKind(e.mz)) {
		scheme := "http"
		if e.internalTLS() {
			scheme = "https"
		}
		return environmentd.URL(scheme, e.generationName(gen), e.ns(), int(e.cfg.HTTPPort))
	}
	return environmentd.URL("http", e.generationName(gen), e.ns(), int(e.cfg.InternalHTTPPort))
}

// unversionedNote qualifies a rollout's condition messages when the image
// tag is not a version: upstream runs such images (developer builds) as
// current ones, and so does the operator, saying so.
func unversionedNote(ref string) string {
	_, tag, ok := imageref.EnvironmentdVersion(ref)
	switch {
	case ok:
		return ""
	case tag == "":
		return fmt.Sprintf(" (image %s has no version tag, so it is run as the newest environmentd)", ref)
	default:
		return fmt.Sprintf(" (image tag %q is not a version vMAJOR.MINOR.PATCH, so it is run as the newest environmentd)", tag)
	}
}

// sharingEnvironmentID returns a Materialize that keeps the environmentId
// mz shares with it (keepsEnvironmentID: a tenant cannot take a running
// environment's id by creating another Materialize), from the informer's index: a
// scan of every Materialize on each pass of each pending rollout grew with
// the square of their number.
func (r *reconciler) sharingEnvironmentID(mz *v1alpha1.Materialize) (*v1alpha1.Materialize, error) {
	if !isSet(mz.Spec.EnvironmentID) {
		return nil, nil
	}
	same, err := r.byEnvironmentID.ByIndex(environmentIDIndex, environmentIDKey(mz.Spec.EnvironmentID))
	if err != nil {
		return nil, fmt.Errorf("finding Materializes with environmentId %q: %w", mz.Spec.EnvironmentID, err)
	}
	for _, obj := range same {
		if other, ok := obj.(*v1alpha1.Materialize); ok && other.UID != mz.UID && keepsEnvironmentID(other, mz) {
			return other, nil
		}
	}
	return nil, nil
}

// keepsEnvironmentID reports whether a keeps an environmentId a and b
// share: the one whose environment runs (it has a catalog under that id),
// else the older (an id filled in later from a license key does not make
// a young environment's id an old Materialize's); the UID orders two
// created in the same second.
func keepsEnvironmentID(a, b *v1alpha1.Materialize) bool {
	if aRuns, bRuns := a.Status.ActiveGeneration > 0, b.Status.ActiveGeneration > 0; aRuns != bRuns {
		return aRuns
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.UID < b.UID
}

// environmentIDIndex indexes Materializes by spec.environmentId as
// mzuuid.Equal compares them (environmentIDKey); unset ones are not indexed.
const environmentIDIndex = "environmentId"

func indexByEnvironmentID(obj any) ([]string, error) {
	mz, ok := obj.(*v1alpha1.Materialize)
	if !ok || !isSet(mz.Spec.EnvironmentID) {
		return nil, nil
	}
	return []string{environmentIDKey(mz.Spec.EnvironmentID)}, nil
}

// environmentIDKey is an environment id as mzuuid.Equal compares it: the
// canonical UUID, or the string as written when it is none.
func environmentIDKey(id string) string {
	if c, err := mzuuid.Canonical(id); err == nil {
		return c
	}
	return id
}

// checkLicenseKey reads the claims environmentd and upstream orchestratord
// act on, without the signature (environmentd checks it): a key that is no
// JWT, that is for another environment (upstream's check) or that expired
// with the Disable behaviour is a problem. Expiry warnings are the
// LicenseKey condition's (license.go).
func (r *reconciler) checkLicenseKey(e env, secretName string, raw []byte) string {
	claims, err := licensekey.Read(raw)
	if err != nil {
		return fmt.Sprintf("backend Secret %q: %q is not a license key environmentd accepts: %v", secretName, LicenseKeyEntry, err)
	}
	if aud, err := mzuuid.Canonical(claims.EnvironmentID); err != nil {
		return fmt.Sprintf("backend Secret %q: invalid environment id in license key: %v", secretName, err)
	} else if aud != mzuuid.Nil && isSet(e.mz.Spec.EnvironmentID) && !mzuuid.Equal(aud, e.mz.Spec.EnvironmentID) {
		return fmt.Sprintf("environment_id is set in materialize resource %s/%s but does not match the environment_id set in the associated license key %s",
			e.mz.Namespace, e.mz.Name, aud)
	}
	if !claims.AllowCreditConsumptionOverride {
		if names := sizesWithoutMemoryLimit(e.cfg.replicaSizes); len(names) > 0 {
			return fmt.Sprintf("No memory limit found in cluster definition for %s: environmentd computes credits from memory_limit "+
				"unless the license key allows overriding credit consumption (operator flag --environmentd-cluster-replica-sizes, chart clusters.sizes)",
				strings.Join(names, ", "))
		}
	}
	expires := claims.ExpiresAt()
	now := r.o.Now()
	if now.After(expires) && claims.ExpirationBehavior == licensekey.Disable {
		return fmt.Sprintf("backend Secret %q: the license key expired at %s, and with expiration_behavior %s environmentd refuses to start",
			secretName, expires.Format(time.RFC3339), claims.ExpirationBehavior)
	}
	return ""
}

// reservedLabelDomain is the domain of the labels the operator and
// environmentd put on environmentd's and clusterd's pods and select them
// by: the NetworkPolicies, the StatefulSets, the pod lookups of a rollout
// and the node-upgrade trigger.
const reservedLabelDomain = "materialize.cloud"

// podLabelsProblem says why spec.podLabels cannot go on the pods. A key in
// the operator's domain would move the pods out of their own environment's
// NetworkPolicies and selectors, or into another environment's in the same
// namespace (its mz-resource-id); upstream lets a pod label override them.
// app.kubernetes.io/name, which the node-upgrade trigger also matches, is
// left to the tenant, as upstream: overriding it concerns its own pods only.
// Syntax is checked here so that the condition names the field, where the
// API server's refusal of the StatefulSet would not.
func podLabelsProblem(labels map[string]string) string {
	for _, k := range sortedKeys(labels) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Sprintf("spec.podLabels: %q is not a label key: %s", boundedtext.Cut(k, maxNameShown), errs[0])
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			return fmt.Sprintf("spec.podLabels: the value of %q is not a label value: %s", k, errs[0])
		}
		if reservedLabelKey(k) {
			return fmt.Sprintf("spec.podLabels: %q is in the %s domain, whose labels the operator and environmentd set on the pods and select them by", k, reservedLabelDomain)
		}
	}
	return ""
}

func reservedLabelKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && (prefix == reservedLabelDomain || strings.HasSuffix(prefix, "."+reservedLabelDomain))
}

// nameIsLabelValue: a Materialize's name is the value of the label
// materialize.cloud/organization-name on every object of its environment.
func nameIsLabelValue(name string) bool { return len(validation.IsValidLabelValue(name)) == 0 }

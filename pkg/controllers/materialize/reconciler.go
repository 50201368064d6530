// Package materialize is the materialize reconciler: it gives each
// Materialize a resource id, creates the environment-wide objects, rolls
// out environmentd generations through environmentd's leader API, and
// applies the environment's Balancer and Console.
package materialize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/boundedtext"
	mzac "github.com/materializeinc/orchestratord/pkg/client/applyconfiguration/materialize/v1alpha1"
	mzlisters "github.com/materializeinc/orchestratord/pkg/client/listers/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/component"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize/rollout"
	"github.com/materializeinc/orchestratord/pkg/controllers/recent"
	"github.com/materializeinc/orchestratord/pkg/controllers/unreadable"
	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/environmentd"
	"github.com/materializeinc/orchestratord/pkg/humantime"
	"github.com/materializeinc/orchestratord/pkg/licensekey"
	"github.com/materializeinc/orchestratord/pkg/mzuuid"
)

// Condition type and reasons, upstream's (docs/rollout.md).
const (
	ConditionUpToDate        = rollout.ConditionUpToDate
	ReasonApplied            = rollout.ReasonApplied
	ReasonApplying           = rollout.ReasonApplying
	ReasonReadyToPromote     = rollout.ReasonReadyToPromote
	ReasonPromoting          = rollout.ReasonPromoting
	ReasonWaitingForApproval = rollout.ReasonWaitingForApproval
	ReasonFailedDeploy       = rollout.ReasonFailedDeploy
	ReasonRolloutTimeout     = rollout.ReasonRolloutTimeout
	// ReasonFailedApply is the Warning Event of an environment object the
	// API server refused with no rollout pending to record it on.
	ReasonFailedApply     = component.ReasonFailedApply
	defaultRolloutTimeout = 24 * time.Hour
	defaultPollInterval   = 2 * time.Second
	// defaultWaitingAfter: a rollout younger than this is not stuck; its
	// pods are not read.
	defaultWaitingAfter   = 20 * time.Second
	defaultPreflightRetry = 15 * time.Second
	controllerName        = "materialize"
	// LastKnownActiveGenerationAnnotation, upstream's, restores the active
	// generation of an environment whose Materialize was deleted and
	// recreated over the same catalog.
	LastKnownActiveGenerationAnnotation = "materialize.cloud/last-known-active-generation"
)

// Options tune the reconciler.
type Options struct {
	// Config is how environments are run (the operator's environment
	// flags); the zero value means DefaultConfig.
	Config Config
	// EnvironmentdURL is the base URL of a generation's environmentd leader
	// API; nil means the generation Service's cluster DNS name on the port
	// upstream uses for the Materialize's authenticator.
	EnvironmentdURL func(mz *v1alpha1.Materialize, resourceID string, generation uint64) string
	// PollInterval is how often a rollout in progress asks environmentd
	// (an environmentd that answers slowly: see slowLeaders).
	PollInterval time.Duration
	// PreflightRetry is how soon a rollout blocked by a missing Secret entry
	// or ConfigMap (which are not watched) looks again.
	PreflightRetry time.Duration
	// CreateBalancers and CreateConsoles apply the environment's Balancer and
	// Console; when false, existing ones are deleted.
	CreateBalancers, CreateConsoles bool
	// BalancerdImage and ConsoleImage override the images derived from the
	// environmentd image (same registry and tag).
	BalancerdImage, ConsoleImage string
	// AllowExistingServiceAccounts lets spec.serviceAccountName name a
	// ServiceAccount the operator did not create, its Materialize's own
	// name included (upstream's behaviour). Off, a spec.serviceAccountName
	// equal to the Materialize's name is the operator's own account, which
	// it applies: the admission policy (which checks only the name) then
	// refuses taking over one someone else made, where upstream would run
	// environmentd as it.
	AllowExistingServiceAccounts bool
	// EnvironmentdClusterRole is the ClusterRole granting EnvironmentdRules
	// that each environment's RoleBinding refers to; empty means
	// DefaultEnvironmentdClusterRole.
	EnvironmentdClusterRole string
	Leader                  *environmentd.Client
	Now                     func() time.Time
	// Waiting counts the rollouts that wait, by what for; nil counts
	// nothing.
	Waiting *Waiting
	// WaitingAfter is how long a rollout runs before its generation's pods
	// are read to say what it waits for (a list per poll), and before its
	// progress alone (environmentd Initializing, CatchingUp) is written to
	// the UpToDate message; zero means defaultWaitingAfter, negative at once.
	WaitingAfter time.Duration
}

type reconciler struct {
	d            controller.Deps
	o            Options
	log          *zap.Logger
	materializes mzlisters.MaterializeLister
	// byEnvironmentID is the Materializes' informer's index of
	// environmentIDIndex.
	byEnvironmentID cache.Indexer
	// recent holds the statuses this reconciler wrote (read-your-writes).
	recent *recent.Writes
	// slow holds back the Materializes whose environmentd answers slowly.
	slow         slowLeaders
	balancers    mzlisters.BalancerLister
	consoles     mzlisters.ConsoleLister
	statefulSets controller.Lister[*appsv1.StatefulSet]
	services     controller.Lister[*corev1.Service]
	configMaps   controller.Lister[*corev1.ConfigMap]
	accounts     controller.Lister[*corev1.ServiceAccount]
	bindings     controller.Lister[*rbacv1.RoleBinding]
	policies     controller.Lister[*networkingv1.NetworkPolicy]
}

// newReconciler is the materialize reconciler over d's informers.
func newReconciler(d controller.Deps, o Options) *reconciler {
	if o.PollInterval <= 0 {
		o.PollInterval = defaultPollInterval
	}
	if o.PreflightRetry <= 0 {
		o.PreflightRetry = defaultPreflightRetry
	}
	if o.WaitingAfter == 0 {
		o.WaitingAfter = defaultWaitingAfter
	}
	if o.Leader == nil {
		o.Leader = &environmentd.Client{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.EnvironmentdClusterRole == "" {
		o.EnvironmentdClusterRole = DefaultEnvironmentdClusterRole
	}
	if o.Config.CloudProvider == "" {
		o.Config = DefaultConfig()
	}
	if o.EnvironmentdURL == nil {
		cfg := o.Config
		o.EnvironmentdURL = func(mz *v1alpha1.Materialize, id string, gen uint64) string {
			return env{mz: mz, id: id, cfg: &cfg}.leaderURL(gen)
		}
	}
	mzInf := d.MZInformers.Materialize().V1alpha1()
	k := d.KubeInformers
	mzInformer := mzInf.Materializes().Informer()
	if err := controller.EnsureIndex(mzInformer, environmentIDIndex, indexByEnvironmentID); err != nil {
		// A stopped informer: the pre-flight check fails with ByIndex's
		// error rather than scanning.
		d.Log.Error("indexing Materializes by environmentId", zap.Error(err))
	}
	r := &reconciler{
		d: d, o: o, log: d.Log.With(zap.String("controller", controllerName)),
		materializes: mzInf.Materializes().Lister(), byEnvironmentID: mzInformer.GetIndexer(),
		recent:       recent.NewWrites(),
		balancers:    mzInf.Balancers().Lister(),
		consoles:     mzInf.Consoles().Lister(),
		statefulSets: controller.StatefulSetLister(k),
		services:     controller.ServiceLister(k),
		configMaps:   controller.ConfigMapLister(k),
		accounts:     controller.ServiceAccountLister(k),
		bindings:     controller.RoleBindingLister(k),
		policies:     controller.NetworkPolicyLister(k),
	}
	return r
}

// New builds the materialize controller.
func New(d controller.Deps, o Options) *controller.Controller {
	r := newReconciler(d, o)
	mzInf := d.MZInformers.Materialize().V1alpha1()
	listKeys := func() []string {
		all, _ := r.materializes.List(everything())
		keys := make([]string, 0, len(all))
		for _, mz := range all {
			keys = append(keys, mz.Namespace+"/"+mz.Name)
		}
		return keys
	}
	informers := []cache.SharedIndexInformer{
		r.statefulSets.Informer(), r.services.Informer(), r.configMaps.Informer(), r.accounts.Informer(),
		r.bindings.Informer(), r.policies.Informer(),
		mzInf.Balancers().Informer(), mzInf.Consoles().Informer(),
	}
	synced := []cache.InformerSynced{mzInf.Materializes().Informer().HasSynced}
	for _, inf := range informers {
		synced = append(synced, inf.HasSynced)
	}
	c := controller.New(controllerName, r, d.Workers, d.Log, d.Metrics, listKeys, synced...)
	// A Materialize a user changed while no replica led (its generation
	// ahead of what was last reconciled) goes before the resync.
	c.PrioritizeChanged(func(key string) bool {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			return false
		}
		mz, err := r.materializes.Materializes(ns).Get(name)
		return err == nil && mz.Generation != mz.Status.ObservedGeneration
	})
	_, _ = mzInf.Materializes().Informer().AddEventHandler(c.Handler())
	for _, inf := range informers {
		_, _ = inf.AddEventHandler(c.OwnerHandler("Materialize"))
	}
	return c
}

func (r *reconciler) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return controller.Result{}, nil
	}
	live, err := r.materializes.Materializes(ns).Get(name)
	if apierrors.IsNotFound(err) {
		r.recent.Forget(key)
		r.o.Waiting.set(key, "")
		r.slow.forget(key)
		return controller.Result{}, nil // children go with it (ownerReferences)
	}
	if err != nil {
		return controller.Result{}, err
	}
	if why, ok := unreadable.Reason(live); ok && live.DeletionTimestamp == nil {
		// Nothing is decided on a spec that was not read: its
		// environment keeps running as it is until the object is fixed,
		// whose update queues it again. (Checked on the cached object,
		// whose marker only the informers' reader sets; being deleted,
		// it needs only its metadata, below.)
		unreadable.Report(r.d.Recorder, live, why)
		return controller.Result{}, nil
	}
	// Read-your-writes: the status this reconciler last wrote, if the
	// informer has not delivered it yet, so a rollout step is not decided
	// twice on a status it has already moved past.
	live, _, _ = recent.Current(ctx, r.recent, key, "", live, true, nil)
	mz := live.DeepCopy()
	if mz.DeletionTimestamp != nil {
		// Garbage collection removes the children; only a finalizer left
		// by upstream orchestratord could hold the delete up.
		return controller.Result{}, r.releaseUpstreamFinalizer(ctx, mz)
	}

	if wait := r.slow.wait(key, r.o.Now()); wait > 0 {
		// Whatever queued it (its owner's writes, its pod's readiness
		// flapping), environmentd is not asked before then; the pass
		// comes then and sees every change made meanwhile.
		return controller.Result{RequeueAfter: wait}, nil
	}
	if filled, err := r.fillSpec(ctx, mz); filled || err != nil {
		return controller.Result{}, err
	}
	if mz.Status.ResourceID == "" {
		// The status update queues the next step.
		return controller.Result{}, r.assignResourceID(ctx, mz)
	}
	e := env{mz: mz, id: mz.Status.ResourceID, cfg: &r.o.Config}
	// The environment's own objects (its ServiceAccount, RoleBinding,
	// certificate and NetworkPolicies) come first. When one is refused, a
	// pending rollout does not go on without it: its condition says which
	// and why (FailedDeploy), and the error brings the retry.
	// One input (the spec's resources hash is a whole generation built and
	// marshalled) serves both the NetworkPolicies' read and the rollout.
	in := r.rolloutInput(e)
	var envErr error
	certified := false
	// A name no label can carry has every object refused: the preflight
	// says so (FailedDeploy), and nothing is sent to be refused.
	labelable := nameIsLabelValue(mz.Name)
	if labelable {
		certified, envErr = r.applyEnvironmentObjects(ctx, e, r.generationToCreate(e, in))
	}
	result, settled, err := r.rollout(ctx, e, in, envErr)
	if certified {
		result.RequeueAfter = apply.WithinCertificateRecheck(result.RequeueAfter)
	}
	if err != nil || !settled || mz.Status.ActiveGeneration == 0 || !labelable {
		return result, err
	}
	// As upstream: balancerd needs environmentd's Service, which exists
	// once a rollout has nothing left to wait for.
	components, err := r.applyComponents(ctx, e)
	if components.RequeueAfter == 0 || (result.RequeueAfter > 0 && result.RequeueAfter < components.RequeueAfter) {
		components.RequeueAfter = result.RequeueAfter // within the certificate recheck already
	}
	return components, err
}

// fresh reads the Materialize from the API server: what is assigned once
// (resourceId, environmentId, the first requestRollout) is decided on it, not
// on the informer's copy, which a second event or a new leader right after a
// handover may see before the first assignment.
func (r *reconciler) fresh(ctx context.Context, cached *v1alpha1.Materialize) (*v1alpha1.Materialize, error) {
	return r.d.MZ.MaterializeV1alpha1().Materializes(cached.Namespace).Get(ctx, cached.Name, metav1.GetOptions{})
}

// assignResourceID gives a Materialize its resourceId, the name of all its
// children, in one status write with the rollout's first decision (the
// rollout begins, Applying, or what blocks it): the two need no outside
// event between them, so they are one write, made before any child is named
// by the id. The children follow on the next pass. The write carries the
// resourceVersion it was decided on, so two writers cannot both assign one:
// the second conflicts, and its retry finds the first's.
func (r *reconciler) assignResourceID(ctx context.Context, cached *v1alpha1.Materialize) error {
	stored, err := r.fresh(ctx, cached)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if stored.Status.ResourceID != "" {
		return nil // assigned already; its update event brings it to the cache
	}
	mz := stored.DeepCopy()
	var badAnnotation bool
	mz.Status, badAnnotation = initialStatus(mz)
	e := env{mz: mz, id: mz.Status.ResourceID, cfg: &r.o.Config}
	d, err := r.decide(ctx, e, r.rolloutInput(e), nil)
	if err != nil {
		return err
	}
	// Compared with, and conditional on, the stored (empty) status.
	if _, err := r.writeStatusWithEvent(ctx, stored, d.out.Status); err != nil {
		return fmt.Errorf("writing status.resourceId: %w", err)
	}
	if badAnnotation {
		last := stored.Annotations[LastKnownActiveGenerationAnnotation]
		r.d.Recorder.Eventf(stored, corev1.EventTypeWarning, "InvalidAnnotation", "%s: %q is not a generation number; ignored",
			LastKnownActiveGenerationAnnotation, boundedtext.Cut(last, 256))
	}
	r.d.Recorder.Eventf(stored, corev1.EventTypeNormal, "ResourceIDAssigned", "children are named mz%s-…", e.id)
	return nil
}

// maxActiveGeneration bounds the generation the annotation may resume
// after: the next one must not wrap to 0, and status.activeGeneration must
// survive JSON readers that hold numbers as float64 (upstream's
// serde_json does not, kubectl's and many others' do).
const maxActiveGeneration = 1<<53 - 1

// initialStatus is upstream's initial status with a new resourceId: the
// upgrade window counts from the image the environment was created with,
// and an environment recreated over an existing catalog resumes after its
// last active generation (environmentd refuses a generation older than the
// catalog's). Every field upstream's typed reader needs is written with it
// (statusApplyConfiguration). badAnnotation: the annotation is there but
// is no generation number, and is ignored.
func initialStatus(mz *v1alpha1.Materialize) (status v1alpha1.MaterializeStatus, badAnnotation bool) {
	status = v1alpha1.MaterializeStatus{
		ResourceID: children.NewResourceID(), ObservedGeneration: mz.Generation,
		LastCompletedRolloutRequest: mzuuid.Nil, LastCompletedRolloutEnvironmentdImageRef: mz.Spec.EnvironmentdImageRef,
	}
	if last, ok := mz.Annotations[LastKnownActiveGenerationAnnotation]; ok {
		gen, err := strconv.ParseUint(last, 10, 64)
		if err != nil || gen > maxActiveGeneration {
			return status, true
		}
		status.ActiveGeneration = gen
	}
	return status, false
}

// fillSpec gives a Materialize its requestRollout and environmentId when
// they are missing, as upstream fills them: by an update that sets only
// those (a merge patch), so the operator owns no field it did not set; a
// user who manages the Materialize by server-side apply then changes
// requestRollout without a conflict. The patch carries the resourceVersion
// the fill was decided on (see assignResourceID). filled is true when the
// reconcile must stop and wait for the update: this write, or one the
// cache has not seen yet.
func (r *reconciler) fillSpec(ctx context.Context, cached *v1alpha1.Materialize) (filled bool, err error) {
	if isSet(cached.Spec.RequestRollout) && isSet(cached.Spec.EnvironmentID) {
		return false, nil
	}
	mz, err := r.fresh(ctx, cached)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return true, err
	}
	request, envID := mz.Spec.RequestRollout, mz.Spec.EnvironmentID
	if isSet(request) && isSet(envID) {
		return true, nil // filled already; the cache is behind
	}
	fill := map[string]string{}
	if !isSet(request) {
		fill["requestRollout"] = uuid.NewString()
	}
	if !isSet(envID) {
		licensed, ok, err := r.licensedEnvironmentID(ctx, mz)
		if err != nil {
			return true, err
		}
		if ok {
			fill["environmentId"] = licensed
		}
		// Otherwise the pre-flight check says what is missing, and the
		// next pass fills it.
	}
	if len(fill) == 0 {
		return false, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]string{"resourceVersion": mz.ResourceVersion}, "spec": fill})
	if err != nil {
		return true, err
	}
	_, err = r.d.MZ.MaterializeV1alpha1().Materializes(mz.Namespace).Patch(ctx, mz.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: apply.FieldManager})
	return true, err
}

func isSet(id string) bool { return mzuuid.IsSet(id) }

// licensedEnvironmentID is the environment a Materialize without one gets,
// as upstream gives it: the one its license key is for, or a new one when
// the key is for any environment (the nil UUID). ok is false while the key
// cannot be read (no Secret, or none the operator may read, no key, no
// JWT): upstream then fills nothing,
// and neither does this; the pre-flight check says why.
func (r *reconciler) licensedEnvironmentID(ctx context.Context, mz *v1alpha1.Materialize) (id string, ok bool, err error) {
	backend := r.readBackendSecret(ctx, mz)
	secret, err := backend.secret, backend.err
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading backend Secret %q: %w", mz.Spec.BackendSecretName, err)
	}
	claims, err := licensekey.Read(secret.Data[LicenseKeyEntry])
	if err != nil {
		return "", false, nil
	}
	aud, err := mzuuid.Canonical(claims.EnvironmentID)
	switch {
	case err != nil:
		return "", false, nil
	case aud == mzuuid.Nil:
		return uuid.NewString(), true, nil
	default:
		return aud, true, nil
	}
}

func (r *reconciler) applyEnvironmentObjects(ctx context.Context, e env, generationNext bool) (certified bool, err error) {
	kube := r.d.Kube
	if own := e.mz.Spec.ServiceAccountName; own == "" || (own == e.mz.Name && !r.o.AllowExistingServiceAccounts) {
		sa := e.serviceAccount()
		if _, _, _, err := applyChild(ctx, r, e, component.NewChild("ServiceAccount", *sa.Name, sa, r.accounts.In(e.ns()),
			kube.CoreV1().ServiceAccounts(e.ns()), corev1acExtractServiceAccount)); err != nil {
			return false, fmt.Errorf("service account: %w", err)
		}
	}
	// environmentd's permissions: the chart's ClusterRole, bound in this
	// namespace (RBAC lets the controllers create the binding with bind on
	// that one ClusterRole, holding none of its permissions).
	binding := e.roleBinding(r.o.EnvironmentdClusterRole)
	if _, _, _, err := applyChild(ctx, r, e, component.NewChild("RoleBinding", *binding.Name, binding, r.bindings.In(e.ns()),
		kube.RbacV1().RoleBindings(e.ns()), rbacacExtractRoleBinding)); err != nil {
		return false, fmt.Errorf("role binding: %w", err)
	}
	cert, err := e.certificate()
	if err != nil {
		return false, component.SpecError{Err: err}
	}
	if cert != nil {
		if err := apply.Certificate(ctx, r.d.Dynamic, cert); err != nil {
			return true, err
		}
	}
	return cert != nil, r.applyNetworkPolicies(ctx, e, generationNext)
}

// applyNetworkPolicies applies the enabled policies and deletes this
// Materialize's others (a switch turned off, or the single policy older
// versions of this operator made). The no-op check reads the cache, which
// may not have seen a policy deleted or changed yet; when a generation is
// created next (generationNext), the policies are read from the API server
// instead: a generation is never created without them, or its pods would
// start without them. Once per rollout.
func (r *reconciler) applyNetworkPolicies(ctx context.Context, e env, generationNext bool) error {
	kube := r.d.Kube
	client := kube.NetworkingV1().NetworkPolicies(e.ns())
	wanted := map[string]bool{}
	for _, policy := range e.networkPolicies() {
		wanted[*policy.Name] = true
		child := component.NewChild("NetworkPolicy", *policy.Name, policy, r.policies.In(e.ns()), client, networkingacExtractNetworkPolicy)
		if generationNext {
			child.Cached = func(name string) (*networkingv1.NetworkPolicy, error) {
				return client.Get(ctx, name, metav1.GetOptions{})
			}
		}
		if _, _, _, err := applyChild(ctx, r, e, child); err != nil {
			return fmt.Errorf("network policy %s: %w", *policy.Name, err)
		}
	}
	existing, err := r.policies.In(e.ns()).WithResourceID(e.id)
	if err != nil {
		return err
	}
	for _, p := range existing {
		if wanted[p.Name] || !ownedBy(p, e.mz) {
			continue
		}
		if err := kube.NetworkingV1().NetworkPolicies(e.ns()).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("network policy %s: %w", p.Name, err)
		}
	}
	return nil
}

// generationToCreate reports whether a rollout is pending (in is e's
// rolloutInput) whose generation has no StatefulSet in the cache yet: this
// pass or the next creates it.
func (r *reconciler) generationToCreate(e env, in rollout.Input) bool {
	desired, pending := rollout.Pending(in)
	if !pending {
		return false
	}
	_, err := r.statefulSets.In(e.ns()).Get(e.generationName(desired))
	return apierrors.IsNotFound(err)
}

// applyChild applies one of the environment's children as the Balancer's
// and Console's are applied (component.Child): not written when it holds
// what is desired, refused when another owner controls it, and remembered
// until the informer has seen the write, so a pass that comes before it
// does not apply it again.
// It returns what Child.Change does.
func applyChild[T metav1.Object, AC any](ctx context.Context, r *reconciler, e env, child component.Child[T, AC]) (before T, existed bool, now T, err error) {
	return child.Change(ctx, r.recent, e.mz, e.key())
}

// rolloutTimeout is upstream's rollout_request_timeout: the spec's value as
// humantime reads it, else (unset or unreadable) the default. note, for a
// value set that does not parse, qualifies the rollout's Applying messages:
// upstream says nothing of it.
func rolloutTimeout(mz *v1alpha1.Materialize) (timeout time.Duration, note string) {
	raw := mz.Spec.RolloutRequestTimeout
	if d, err := humantime.Parse(raw); err == nil {
		return d, ""
	}
	if raw != "" {
		note = fmt.Sprintf(" (spec.rolloutRequestTimeout %q is not a duration such as 24h, 90m or 1h 30m, so the default %s applies)",
			boundedtext.Cut(raw, maxTimeoutShown), humantime.Format(defaultRolloutTimeout))
	}
	return defaultRolloutTimeout, note
}

// maxTimeoutShown bounds the tenant's value quoted in rolloutTimeout's note.
const maxTimeoutShown = 64

// rolloutInput is what the rollout's state machine decides on, before
// anything is observed.
func (r *reconciler) rolloutInput(e env) rollout.Input {
	mz := e.mz
	// Requests are compared as upstream compares them: as UUIDs, absent
	// being the nil UUID, so a spelling is never a new request.
	status := *mz.Status.DeepCopy()
	status.LastCompletedRolloutRequest = mzuuid.Value(status.LastCompletedRolloutRequest)
	if status.Rollout != nil {
		status.Rollout.Request = mzuuid.Value(status.Rollout.Request)
	}
	timeout, timeoutNote := rolloutTimeout(mz)
	return rollout.Input{
		Now: r.o.Now(), MetaGeneration: mz.Generation,
		Request: mzuuid.Value(mz.Spec.RequestRollout), Image: mz.Spec.EnvironmentdImageRef,
		ManuallyPromote:   mz.Spec.RolloutStrategy == v1alpha1.RolloutManuallyPromote,
		DeleteActiveFirst: mz.Spec.RolloutStrategy == v1alpha1.RolloutImmediatelyPromoteCausingDowntime,
		Timeout:           timeout, Retry: r.o.PreflightRetry,
		Status: status, Hash: e.resourcesHash(), Note: unversionedNote(mz.Spec.EnvironmentdImageRef) + timeoutNote,
		// Progress is written from when the pods' wait is explained.
		QuietFor: r.o.WaitingAfter,
	}
}

// decision is one step of the rollout decided: what Step was given, what
// it decided, and what acting on it needs.
type decision struct {
	in      rollout.Input
	out     rollout.Output
	leader  *environmentd.Client
	license licenseState
	// leaderTime is what the calls of leader took, acting included.
	leaderTime *time.Duration
}

// decide observes the rollout (the generation's StatefulSet, environmentd,
// the pre-flight check, the license key) and runs Step on it. It writes
// nothing. in is e's rolloutInput; envErr is as for rollout.
func (r *reconciler) decide(ctx context.Context, e env, in rollout.Input, envErr error) (decision, error) {
	mz := e.mz
	// in may have been made before the environment's objects were
	// applied; the step is timed from now.
	in.Now = r.o.Now()
	status := in.Status
	leaderTime := new(time.Duration)
	leader := r.o.Leader.Timed(leaderTime)
	// One read of the backend Secret serves the LicenseKey condition and
	// the pre-flight check.
	backend := r.readBackendSecret(ctx, mz)
	desired, pending := rollout.Pending(in)
	if envErr != nil && !pending {
		// No rollout to record it on (a change to the ServiceAccount's
		// labels or a certificate spec, without a new request): the
		// condition stays the running generation's, and the owner hears of
		// a refusal from an Event (repeats folded by the recorder) while it
		// is retried with backoff; a passing error only from the log.
		if component.Refused(envErr) {
			r.d.Recorder.Eventf(mz, corev1.EventTypeWarning, ReasonFailedApply, "Failed to apply environment objects: %s",
				boundedtext.Cut(envErr.Error(), rollout.MaxMessageBytes))
		}
		return decision{}, envErr
	}
	if pending {
		var err error
		if in.Forced, err = r.forcePromote(ctx, mz); err != nil {
			return decision{}, err
		}
		sts, getErr := r.statefulSets.In(e.ns()).Get(e.generationName(desired))
		pre, err := r.preflight(ctx, e, getErr == nil, backend)
		if err != nil {
			return decision{}, err
		}
		in.Blocked = pre.problem
		if pre.password != "" {
			leader = leader.WithPassword(pre.password)
		}
		ready := getErr == nil && statefulSetReady(sts)
		promotionSent := status.Rollout != nil && status.Rollout.PromotionSentAt != nil
		if envErr != nil && !promotionSent {
			in.ApplyFailed = envErr.Error()
		} else if ready {
			in.Desired = r.observeLeader(ctx, leader, r.o.EnvironmentdURL(mz, e.id, desired), pre.problem)
		}
		waitingFor := ""
		if getErr == nil && status.Rollout != nil && in.Now.Sub(status.Rollout.StartedAt.Time) >= r.o.WaitingAfter {
			switch leaderStatus := in.Desired.Leader; {
			case !ready || leaderStatus == rollout.Initializing || leaderStatus == rollout.CatchingUp:
				waitingFor, in.Desired.Waiting = r.waiting(ctx, e, desired, leaderStatus, ready)
			case leaderStatus != rollout.ReadyToPromote: // ready: it waits for a promotion, not for pods
				waitingFor = WaitingEnvironmentd
			}
		}
		r.o.Waiting.set(mz.Namespace+"/"+mz.Name, waitingFor)
	} else {
		r.o.Waiting.set(mz.Namespace+"/"+mz.Name, "")
	}
	license := r.licenseKeyState(ctx, mz, backend)
	if license.cond != nil {
		in.Also = []metav1.Condition{*license.cond}
	}
	out := rollout.Step(in)
	if out.Status.Rollout == nil { // nothing in progress once this step is done
		r.o.Waiting.set(mz.Namespace+"/"+mz.Name, "")
	}
	return decision{in: in, out: out, leader: leader, license: license, leaderTime: leaderTime}, nil
}

// rollout runs one step of the rollout state machine (package rollout):
// observe, decide, act. settled is true when nothing waits on environmentd,
// so the Balancer and Console may be applied. envErr is why the
// environment's own objects could not be applied: the rollout records it
// and goes no further (a promotion already sent goes on).
func (r *reconciler) rollout(ctx context.Context, e env, in rollout.Input, envErr error) (result controller.Result, settled bool, err error) {
	mz := e.mz
	d, err := r.decide(ctx, e, in, envErr)
	if err != nil {
		return controller.Result{}, false, err
	}
	in, out, leader, license := d.in, d.out, d.leader, d.license
	err = r.act(ctx, e, out, leader)
	var failed *applyFailedError
	switch {
	case errors.Is(err, errObserveAgain):
		return controller.Result{RequeueAfter: r.o.PollInterval}, false, nil
	case errors.As(err, &failed) && ctx.Err() == nil:
		// The generation could not be applied: FailedDeploy, as upstream,
		// and looked at again (the rollout's timeout included) without
		// another event; an error the API server may not repeat (a
		// timeout, a webhook down) is also retried with backoff.
		in.ApplyFailed = failed.err.Error()
		out = rollout.Step(in)
		if err := r.act(ctx, e, out, leader); err != nil {
			return controller.Result{}, false, err
		}
		if !apierrors.IsInvalid(failed.err) && !apierrors.IsBadRequest(failed.err) {
			return controller.Result{}, false, failed
		}
	case err != nil:
		return controller.Result{}, false, err
	case envErr != nil:
		return controller.Result{}, false, envErr
	}
	mz.Status = out.Status // the Balancer and Console follow what now runs
	switch {
	case out.Poll:
		// Held from now, after the answers: from the pass's start the
		// spacing of the calls would lose the time before the first one.
		var gen uint64
		if mz.Status.Rollout != nil {
			gen = mz.Status.Rollout.Generation
		}
		after := r.slow.answered(mz.Namespace+"/"+mz.Name, gen, r.o.Now(), r.o.PollInterval, *d.leaderTime)
		return controller.Result{RequeueAfter: after}, false, nil
	case out.RecheckAfter > 0 && (license.recheck <= 0 || out.RecheckAfter < license.recheck):
		return controller.Result{RequeueAfter: out.RecheckAfter}, true, nil
	case license.recheck > 0:
		// The LicenseKey condition changes by the clock alone.
		return controller.Result{RequeueAfter: license.recheck}, true, nil
	}
	return controller.Result{}, true, nil
}

// StartTerm forgets the slow environmentds of this process's earlier
// terms: an answer timed out while its pod was being evicted, say, would
// otherwise hold back a rollout of this term for up to ten times the
// client's timeout, with nothing written meanwhile.
func (r *reconciler) StartTerm() { r.slow.forgetAll() }

// statefulSetReady is upstream's gate before the leader API: a ready
// replica, of the StatefulSet's current spec (observed, and rolled out to
// its pods, so a promotion never goes to a pod about to be replaced).
func statefulSetReady(sts *appsv1.StatefulSet) bool {
	st := sts.Status
	return st.ObservedGeneration >= sts.Generation && st.ReadyReplicas > 0 && st.CurrentRevision == st.UpdateRevision
}

// observeLeader asks a generation's environmentd for its leader status.
func (r *reconciler) observeLeader(ctx context.Context, leader *environmentd.Client, url, problem string) rollout.Observation {
	if problem != "" {
		return rollout.Observation{Ready: true, LeaderErr: problem}
	}
	status, err := leader.Status(ctx, url)
	if err != nil {
		return rollout.Observation{Ready: true, LeaderErr: err.Error()}
	}
	return rollout.Observation{Ready: true, Leader: string(status)}
}

// applyFailedError is an ApplyGeneration that failed.
type applyFailedError struct{ err error }

func (e *applyFailedError) Error() string { return e.err.Error() }

// errObserveAgain stops a Step's actions when what it was decided on is
// outdated by this reconcile: the generation's StatefulSet just changed, so
// its readiness (and environmentd's answer) were of the pod it replaces.
var errObserveAgain = errors.New("the generation changed; observing it again")

// act does a Step's actions in order. Deletes are the one write that no
// precondition protects, so before the first one the Materialize is read
// back: a decision made on a copy older than the stored object (a cache
// behind, a new leader right after a handover) deletes nothing.
func (r *reconciler) act(ctx context.Context, e env, out rollout.Output, leader *environmentd.Client) error {
	mz := e.mz
	confirmed := false
	confirm := func() error {
		if confirmed {
			return nil
		}
		live, err := r.fresh(ctx, mz)
		if err != nil {
			return err
		}
		if live.ResourceVersion != mz.ResourceVersion {
			return apierrors.NewConflict(v1alpha1.Resource("materializes"), mz.Name,
				fmt.Errorf("decided on resourceVersion %s, stored is %s", mz.ResourceVersion, live.ResourceVersion))
		}
		confirmed = true
		return nil
	}
	for _, a := range out.Actions {
		url := r.o.EnvironmentdURL(mz, e.id, a.Generation)
		var err error
		switch a.Kind {
		case rollout.DeleteGeneration:
			err = r.deleteGeneration(ctx, e, a.Generation, confirm)
		case rollout.ApplyGeneration:
			changed, err := r.applyGeneration(ctx, e, a.Generation)
			if err != nil {
				return &applyFailedError{err: fmt.Errorf("%s: %w", a, err)}
			}
			if changed {
				return errObserveAgain
			}
		case rollout.WriteStatus:
			var wrote bool
			if wrote, err = r.writeStatusWithEvent(ctx, mz, out.Status); wrote {
				confirmed = true // the write's precondition confirmed it
			}
		case rollout.SkipCatchup:
			// A nudge: environmentd refuses it outside catching up (400),
			// and the rollout promotes once it says ReadyToPromote anyway.
			if err := leader.SkipCatchup(ctx, url); err != nil && ctx.Err() == nil {
				controller.Logger(ctx, r.log).Debug("skip-catchup refused; waiting", zap.String("materialize", mz.Namespace+"/"+mz.Name), zap.Error(err))
			}
		case rollout.Promote:
			err = leader.Promote(ctx, url)
		case rollout.Route:
			err = r.applyPublicService(ctx, e, a.Generation)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	return nil
}

// forcePromote is upstream's should_force_promote: spec.forcePromote names
// the request (v1alpha1) or the rollout hash (v1), or the strategy promotes
// without waiting.
// A failed read is an error, not "not forced": a forced rollout past its
// deadline would otherwise be cancelled over a transient error.
func (r *reconciler) forcePromote(ctx context.Context, mz *v1alpha1.Materialize) (bool, error) {
	if mz.Spec.RolloutStrategy == v1alpha1.RolloutImmediatelyPromoteCausingDowntime {
		return true, nil
	}
	if mz.Spec.ForcePromote == "" {
		return false, nil
	}
	// Upstream compares forcePromote, as written, with the request as it
	// writes a UUID (lower-case, hyphenated).
	if mz.Spec.ForcePromote == mzuuid.Value(mz.Spec.RequestRollout) {
		return true, nil
	}
	// The v1 hash is computed from the stored JSON, as the webhook does.
	stored, err := conversion.ReadStored(ctx, r.d.MZ.MaterializeV1alpha1().RESTClient(), mz.Namespace, mz.Name)
	if err != nil {
		return false, fmt.Errorf("reading the stored Materialize for spec.forcePromote: %w", err)
	}
	hash, err := conversion.V1RolloutHash(stored, nil)
	if err != nil {
		return false, fmt.Errorf("spec.forcePromote: computing the v1 rollout hash: %w", err)
	}
	return mz.Spec.ForcePromote == hash, nil
}

// applyGeneration applies a generation's objects in upstream's order: the
// StatefulSet last, so its pod finds its Services and listeners file.
// changed reports whether the StatefulSet was written.
func (r *reconciler) applyGeneration(ctx context.Context, e env, gen uint64) (changed bool, err error) {
	g := e.generation(gen)
	kube := r.d.Kube
	services := kube.CoreV1().Services(e.ns())
	for _, svc := range []*corev1ac.ServiceApplyConfiguration{g.service, g.persistPubSub} {
		if _, _, _, err := applyChild(ctx, r, e, component.NewChild("Service", *svc.Name, svc, r.services.In(e.ns()), services, corev1acExtractService)); err != nil {
			return false, err
		}
	}
	if _, _, _, err := applyChild(ctx, r, e, component.NewChild("ConfigMap", *g.listeners.Name, g.listeners, r.configMaps.In(e.ns()),
		kube.CoreV1().ConfigMaps(e.ns()), corev1acExtractConfigMap)); err != nil {
		return false, err
	}
	withoutNullResources(g.statefulSet)
	before, existed, now, err := applyChild(ctx, r, e, component.NewChild("StatefulSet", *g.statefulSet.Name, g.statefulSet, r.statefulSets.In(e.ns()),
		kube.AppsV1().StatefulSets(e.ns()), appsacExtractStatefulSet))
	if err != nil {
		return false, err
	}
	// A new spec (metadata.generation) means new pods; an apply the API
	// server found to change nothing (a quantity written another way) does
	// not.
	return !existed || now.Generation != before.Generation, nil
}

func (r *reconciler) applyPublicService(ctx context.Context, e env, gen uint64) error {
	svc := e.publicService(gen)
	_, _, _, err := applyChild(ctx, r, e, component.NewChild("Service", *svc.Name, svc, r.services.In(e.ns()),
		r.d.Kube.CoreV1().Services(e.ns()), corev1acExtractService))
	return err
}

// deleteGeneration removes a generation's objects that still exist,
// calling confirm before the first delete.
func (r *reconciler) deleteGeneration(ctx context.Context, e env, gen uint64, confirm func() error) error {
	name, ns := e.generationName(gen), e.ns()
	del := func(exists bool, remove func(context.Context, string, metav1.DeleteOptions) error, n string) error {
		if !exists {
			return nil
		}
		if err := confirm(); err != nil {
			return err
		}
		err := remove(ctx, n, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	_, err := r.statefulSets.In(ns).Get(name)
	if err := del(err == nil, r.d.Kube.AppsV1().StatefulSets(ns).Delete, name); err != nil {
		return err
	}
	for _, svc := range []string{name, e.persistPubSubName(gen)} {
		_, err = r.services.In(ns).Get(svc)
		if err := del(err == nil, r.d.Kube.CoreV1().Services(ns).Delete, svc); err != nil {
			return err
		}
	}
	_, err = r.configMaps.In(ns).Get(e.listenersName(gen))
	return del(err == nil, r.d.Kube.CoreV1().ConfigMaps(ns).Delete, e.listenersName(gen))
}

func (r *reconciler) writeStatusWithEvent(ctx context.Context, mz *v1alpha1.Materialize, st v1alpha1.MaterializeStatus) (bool, error) {
	previous := v1alpha1.MaterializeStatus{Conditions: append([]metav1.Condition(nil), mz.Status.Conditions...)}
	before := meta.FindStatusCondition(previous.Conditions, ConditionUpToDate)
	wrote, err := r.writeStatus(ctx, mz, st)
	if err != nil || !wrote {
		return wrote, err
	}
	r.licenseEvent(mz, previous, st)
	after := meta.FindStatusCondition(st.Conditions, ConditionUpToDate)
	if after != nil && (before == nil || before.Reason != after.Reason || before.Status != after.Status) {
		kind := corev1.EventTypeNormal
		if after.Reason == ReasonFailedDeploy || after.Reason == ReasonRolloutTimeout {
			kind = corev1.EventTypeWarning
		}
		r.d.Recorder.Event(mz, kind, after.Reason, after.Message)
	}
	return true, nil
}

// statusApplyConfiguration is st as an apply configuration. The fields
// upstream's v1alpha1 status requires are always written (activeGeneration
// 0, resourcesHash "", the nil UUID for no completed request), so upstream
// can read every Materialize this operator wrote (docs/migrating-from-orchestratord.md).
func statusApplyConfiguration(st v1alpha1.MaterializeStatus) *mzac.MaterializeStatusApplyConfiguration {
	status := mzac.MaterializeStatus().WithResourceID(st.ResourceID).WithObservedGeneration(st.ObservedGeneration).
		WithActiveGeneration(st.ActiveGeneration).WithResourcesHash(st.ResourcesHash).
		WithLastCompletedRolloutRequest(mzuuid.Value(st.LastCompletedRolloutRequest))
	if st.LastCompletedRolloutEnvironmentdImageRef != "" {
		status.WithLastCompletedRolloutEnvironmentdImageRef(st.LastCompletedRolloutEnvironmentdImageRef)
	}
	if st.LastCompletedRolloutHash != "" {
		status.WithLastCompletedRolloutHash(st.LastCompletedRolloutHash)
	}
	if p := st.Rollout; p != nil {
		rollout := mzac.MaterializeRolloutStatus().WithRequest(p.Request).WithGeneration(p.Generation).WithStartedAt(p.StartedAt)
		if p.EnvironmentdImageRef != "" {
			rollout.WithEnvironmentdImageRef(p.EnvironmentdImageRef)
		}
		if p.PromotionSentAt != nil {
			rollout.WithPromotionSentAt(*p.PromotionSentAt)
		}
		status.WithRollout(rollout)
	}
	for _, c := range st.Conditions {
		status.WithConditions(apply.ConditionApplyConfiguration(c))
	}
	return status
}

// ownedStatus is the status this reconciler writes, as live holds it: the
// whole status, so a field the desired status drops (status.rollout when a
// rollout ends) counts as a change. A status without
// lastCompletedRolloutRequest (written before every required field was)
// differs too, and is written whole.
func ownedStatus(live *v1alpha1.Materialize, _ string) (*mzac.MaterializeApplyConfiguration, error) {
	status := statusApplyConfiguration(live.Status)
	if live.Status.LastCompletedRolloutRequest == "" {
		status.LastCompletedRolloutRequest = nil
	}
	return mzac.Materialize(live.Name, live.Namespace).WithStatus(status), nil
}

// writeStatus applies the whole status unless live already holds it. The
// write carries the resourceVersion the status was decided on: a decision
// made on a stale copy (a cache behind another writer, a new leader right
// after a handover) conflicts and is made again, instead of, say, setting
// activeGeneration back.
func (r *reconciler) writeStatus(ctx context.Context, live *v1alpha1.Materialize, st v1alpha1.MaterializeStatus) (bool, error) {
	desired := mzac.Materialize(live.Name, live.Namespace).WithStatus(statusApplyConfiguration(st))
	client := r.d.MZ.MaterializeV1alpha1().Materializes(live.Namespace)
	return apply.Status(ctx, live, desired, ownedStatus,
		func(ctx context.Context, ac *mzac.MaterializeApplyConfiguration, opts metav1.ApplyOptions) (*v1alpha1.Materialize, error) {
			out, err := client.ApplyStatus(ctx, ac.WithResourceVersion(live.ResourceVersion), opts)
			if err == nil {
				r.recent.Put(live.Namespace+"/"+live.Name, "", out)
				// What follows in this reconcile is decided on the write.
				live.ResourceVersion, live.Status = out.ResourceVersion, out.Status
			}
			return out, err
		})
}

func ptr[T any](v T) *T { return &v }

var _ controller.TermStarter = (*reconciler)(nil)

// Package materialize is the materialize reconciler: it gives each
// Materialize a resource id, creates the environment-wide objects, rolls
// out environmentd generations through environmentd's leader API, and
// applies the environment's Balancer and Console.
package materialize

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzac "github.com/materializeinc/orchestratord/pkg/client/applyconfiguration/materialize/v1alpha1"
	mzlisters "github.com/materializeinc/orchestratord/pkg/client/listers/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	ctrlcomponent "github.com/materializeinc/orchestratord/pkg/controllers/component"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/environmentd"
	"k8s.io/apimachinery/pkg/labels"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
)

// Condition type and reasons (SPEC.md §3).
const (
	ConditionUpToDate        = "UpToDate"
	ReasonApplied            = "Applied"
	ReasonApplying           = "Applying"
	ReasonReadyToPromote     = "ReadyToPromote"
	ReasonPromoting          = "Promoting"
	ReasonWaitingForApproval = "WaitingForApproval"
	ReasonFailedDeploy       = "FailedDeploy"
	ReasonRolloutTimeout     = "RolloutTimeout"
	defaultRolloutTimeout    = 24 * time.Hour
	defaultPollInterval      = 2 * time.Second
	defaultPreflightRetry    = 15 * time.Second
	controllerName           = "materialize"
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
	// PollInterval is how often a rollout in progress asks environmentd.
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
	Leader                       *environmentd.Client
	Now                          func() time.Time
}

type reconciler struct {
	d            controller.Deps
	o            Options
	log          *zap.Logger
	materializes mzlisters.MaterializeLister
	balancers    mzlisters.BalancerLister
	consoles     mzlisters.ConsoleLister
	statefulSets appslisters.StatefulSetLister
	services     corelisters.ServiceLister
	configMaps   corelisters.ConfigMapLister
	accounts     corelisters.ServiceAccountLister
	roles        rbaclisters.RoleLister
	bindings     rbaclisters.RoleBindingLister
	policies     networkinglisters.NetworkPolicyLister
}

// newReconciler is the materialize reconciler over d's informers.
func newReconciler(d controller.Deps, o Options) *reconciler {
	if o.PollInterval <= 0 {
		o.PollInterval = defaultPollInterval
	}
	if o.PreflightRetry <= 0 {
		o.PreflightRetry = defaultPreflightRetry
	}
	if o.Leader == nil {
		o.Leader = &environmentd.Client{}
	}
	if o.Now == nil {
		o.Now = time.Now
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
	r := &reconciler{
		d: d, o: o, log: d.Log.With(zap.String("controller", controllerName)),
		materializes: mzInf.Materializes().Lister(),
		balancers:    mzInf.Balancers().Lister(),
		consoles:     mzInf.Consoles().Lister(),
		statefulSets: k.Apps().V1().StatefulSets().Lister(),
		services:     k.Core().V1().Services().Lister(),
		configMaps:   k.Core().V1().ConfigMaps().Lister(),
		accounts:     k.Core().V1().ServiceAccounts().Lister(),
		roles:        k.Rbac().V1().Roles().Lister(),
		bindings:     k.Rbac().V1().RoleBindings().Lister(),
		policies:     k.Networking().V1().NetworkPolicies().Lister(),
	}
	return r
}

// New builds the materialize controller.
func New(d controller.Deps, o Options) *controller.Controller {
	r := newReconciler(d, o)
	mzInf := d.MZInformers.Materialize().V1alpha1()
	k := d.KubeInformers
	listKeys := func() []string {
		all, _ := r.materializes.List(everything())
		keys := make([]string, 0, len(all))
		for _, mz := range all {
			keys = append(keys, mz.Namespace+"/"+mz.Name)
		}
		return keys
	}
	informers := []cache.SharedIndexInformer{
		k.Apps().V1().StatefulSets().Informer(), k.Core().V1().Services().Informer(),
		k.Core().V1().ConfigMaps().Informer(), k.Core().V1().ServiceAccounts().Informer(),
		k.Rbac().V1().Roles().Informer(), k.Rbac().V1().RoleBindings().Informer(),
		k.Networking().V1().NetworkPolicies().Informer(),
		mzInf.Balancers().Informer(), mzInf.Consoles().Informer(),
	}
	synced := []cache.InformerSynced{mzInf.Materializes().Informer().HasSynced}
	for _, inf := range informers {
		synced = append(synced, inf.HasSynced)
	}
	c := controller.New(controllerName, r, d.Workers, d.Log, d.Metrics, listKeys, synced...)
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
		return controller.Result{}, nil // children go with it (ownerReferences)
	}
	if err != nil {
		return controller.Result{}, err
	}
	mz := live.DeepCopy()
	if mz.DeletionTimestamp != nil {
		// Garbage collection removes the children; only a finalizer left
		// by upstream orchestratord could hold the delete up.
		return controller.Result{}, r.releaseUpstreamFinalizer(ctx, mz)
	}

	if mz.Status.ResourceID == "" {
		// The status update queues the next step.
		return controller.Result{}, r.assignResourceID(ctx, mz)
	}
	if filled, err := r.fillSpec(ctx, mz); filled || err != nil {
		return controller.Result{}, err
	}
	e := env{mz: mz, id: mz.Status.ResourceID, cfg: &r.o.Config}
	if err := r.applyEnvironmentObjects(ctx, e); err != nil {
		return controller.Result{}, err
	}
	result, err := r.rollout(ctx, e)
	if err != nil {
		return result, err
	}
	if mz.Status.ActiveGeneration > 0 && result.RequeueAfter == 0 {
		// As upstream: balancerd needs environmentd's Service, which exists
		// once a rollout has nothing left to wait for.
		return r.applyComponents(ctx, e)
	}
	return result, nil
}

// fresh reads the Materialize from the API server: what is assigned once
// (resourceId, environmentId, the first requestRollout) is decided on it, not
// on the informer's copy, which a second event or a new leader right after a
// handover may see before the first assignment.
func (r *reconciler) fresh(ctx context.Context, cached *v1alpha1.Materialize) (*v1alpha1.Materialize, error) {
	return r.d.MZ.MaterializeV1alpha1().Materializes(cached.Namespace).Get(ctx, cached.Name, metav1.GetOptions{})
}

// assignResourceID gives a Materialize its resourceId, the name of all its
// children. The write carries the resourceVersion it was decided on, so two
// writers cannot both assign one: the second conflicts, and its retry finds
// the first's.
func (r *reconciler) assignResourceID(ctx context.Context, cached *v1alpha1.Materialize) error {
	mz, err := r.fresh(ctx, cached)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if mz.Status.ResourceID != "" {
		return nil // assigned already; its update event brings it to the cache
	}
	id := children.NewResourceID()
	desired := mzac.Materialize(mz.Name, mz.Namespace).WithResourceVersion(mz.ResourceVersion).
		WithStatus(mzac.MaterializeStatus().WithResourceID(id).WithObservedGeneration(mz.Generation))
	if _, err := r.d.MZ.MaterializeV1alpha1().Materializes(mz.Namespace).ApplyStatus(ctx, desired, apply.Options()); err != nil {
		return fmt.Errorf("writing status.resourceId: %w", err)
	}
	r.d.Recorder.Eventf(mz, corev1.EventTypeNormal, "ResourceIDAssigned", "children are named mz%s-…", id)
	return nil
}

// fillSpec gives a Materialize its requestRollout and environmentId when
// they are missing; both are applied together so neither is dropped, with
// the resourceVersion they were decided on (see assignResourceID). filled is
// true when the reconcile must stop and wait for the update: this write, or
// one the cache has not seen yet.
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
	if !isSet(request) {
		request = uuid.NewString()
	}
	if !isSet(envID) {
		envID = uuid.NewString()
	}
	desired := mzac.Materialize(mz.Name, mz.Namespace).WithResourceVersion(mz.ResourceVersion).
		WithSpec(mzac.MaterializeSpec().WithRequestRollout(request).WithEnvironmentID(envID))
	_, err = r.d.MZ.MaterializeV1alpha1().Materializes(mz.Namespace).Apply(ctx, desired, apply.Options())
	return true, err
}

func isSet(id string) bool { return id != "" && id != nilUUID }

func (r *reconciler) applyEnvironmentObjects(ctx context.Context, e env) error {
	kube := r.d.Kube
	if e.mz.Spec.ServiceAccountName == "" {
		sa := e.serviceAccount()
		live, err := r.accounts.ServiceAccounts(e.ns()).Get(*sa.Name)
		if err := applyChild(ctx, live, err, sa, corev1acExtractServiceAccount, kube.CoreV1().ServiceAccounts(e.ns()).Apply); err != nil {
			return fmt.Errorf("service account: %w", err)
		}
	}
	role := e.role()
	liveRole, err := r.roles.Roles(e.ns()).Get(*role.Name)
	if err := applyChild(ctx, liveRole, err, role, rbacacExtractRole, kube.RbacV1().Roles(e.ns()).Apply); err != nil {
		return fmt.Errorf("role: %w", err)
	}
	binding := e.roleBinding()
	liveBinding, err := r.bindings.RoleBindings(e.ns()).Get(*binding.Name)
	if err := applyChild(ctx, liveBinding, err, binding, rbacacExtractRoleBinding, kube.RbacV1().RoleBindings(e.ns()).Apply); err != nil {
		return fmt.Errorf("role binding: %w", err)
	}
	cert, err := e.certificate()
	if err != nil {
		return err
	}
	if cert != nil {
		if err := ctrlcomponent.ApplyCertificate(ctx, r.d.Dynamic, cert); err != nil {
			return err
		}
	}
	return r.applyNetworkPolicies(ctx, e)
}

// applyNetworkPolicies applies the enabled policies and deletes this
// Materialize's others (a switch turned off, or the single policy older
// versions of this operator made).
func (r *reconciler) applyNetworkPolicies(ctx context.Context, e env) error {
	kube := r.d.Kube
	wanted := map[string]bool{}
	for _, policy := range e.networkPolicies() {
		wanted[*policy.Name] = true
		live, err := r.policies.NetworkPolicies(e.ns()).Get(*policy.Name)
		if err := applyChild(ctx, live, err, policy, networkingacExtractNetworkPolicy, kube.NetworkingV1().NetworkPolicies(e.ns()).Apply); err != nil {
			return fmt.Errorf("network policy %s: %w", *policy.Name, err)
		}
	}
	existing, err := r.policies.NetworkPolicies(e.ns()).List(labels.SelectorFromSet(labels.Set{children.ResourceIDLabel: e.id}))
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

// applyChild applies a child read from a lister (err is the lister's).
func applyChild[T any, AC any](ctx context.Context, live T, getErr error, desired AC,
	extract func(T, string) (AC, error), write func(context.Context, AC, metav1.ApplyOptions) (T, error),
) error {
	if getErr != nil && !apierrors.IsNotFound(getErr) {
		return getErr
	}
	_, err := apply.Object(ctx, live, getErr == nil, desired, extract, write)
	return err
}

func rolloutTimeout(mz *v1alpha1.Materialize) time.Duration {
	if d, err := time.ParseDuration(mz.Spec.RolloutRequestTimeout); err == nil && d > 0 {
		return d
	}
	return defaultRolloutTimeout
}

// rolloutPrefix starts every condition message about a rollout, tying the
// condition to the request it is about.
func rolloutPrefix(request string) string { return "rollout " + request + ": " }

func (r *reconciler) rollout(ctx context.Context, e env) (controller.Result, error) {
	mz := e.mz
	st := mz.Status
	st.ObservedGeneration = mz.Generation
	hash := e.resourcesHash()
	requested := mz.Spec.RequestRollout != st.LastCompletedRolloutRequest
	current := meta.FindStatusCondition(st.Conditions, ConditionUpToDate)
	prefix := rolloutPrefix(mz.Spec.RequestRollout)

	if !requested || (hash == st.ResourcesHash && st.ActiveGeneration > 0) {
		if requested {
			st.LastCompletedRolloutRequest = mz.Spec.RequestRollout // nothing to roll out
		}
		// A request withdrawn mid-rollout leaves a generation that would
		// hold back compaction: it goes, as upstream tears it down.
		if err := r.deleteGeneration(ctx, e, st.ActiveGeneration+1); err != nil {
			return controller.Result{}, err
		}
		if st.ActiveGeneration > 0 {
			if err := r.applyPublicService(ctx, e, st.ActiveGeneration); err != nil {
				return controller.Result{}, err
			}
		}
		if hash != st.ResourcesHash && st.ActiveGeneration > 0 {
			// Upstream's "changes detected": they wait for a new request.
			return controller.Result{}, r.setUpToDate(ctx, mz, st, metav1.ConditionFalse, ReasonWaitingForApproval,
				fmt.Sprintf("changes detected, waiting for approval for generation %d (a new spec.requestRollout)", st.ActiveGeneration+1))
		}
		return controller.Result{}, r.setUpToDate(ctx, mz, st, metav1.ConditionTrue, ReasonApplied, activeMessage(st.ActiveGeneration))
	}

	if current != nil && current.Reason == ReasonRolloutTimeout && strings.HasPrefix(current.Message, prefix) {
		return controller.Result{}, nil // timed out; waits for a new request
	}
	desired := st.ActiveGeneration + 1
	started := r.o.Now()
	if current != nil && current.Status != metav1.ConditionTrue && strings.HasPrefix(current.Message, prefix) {
		started = current.LastTransitionTime.Time
	}
	// Once Promoting is recorded the rollout only promotes: the new
	// generation may already have fenced the old one out.
	promoting := current != nil && current.Reason == ReasonPromoting && strings.HasPrefix(current.Message, prefix)
	_, getErr := r.statefulSets.StatefulSets(e.ns()).Get(e.generationName(desired))
	pre, err := r.preflight(ctx, e, getErr == nil)
	if err != nil {
		return controller.Result{}, err
	}
	leader := r.o.Leader
	if pre.password != "" {
		leader = leader.WithPassword(pre.password)
	}
	url := r.o.EnvironmentdURL(mz, e.id, desired)
	forced := r.forcePromote(ctx, mz)
	if timeout := rolloutTimeout(mz); !promoting && !forced && r.o.Now().Sub(started) > timeout && r.notPromoting(ctx, leader, url) {
		if err := r.deleteGeneration(ctx, e, desired); err != nil {
			return controller.Result{}, err
		}
		r.d.Recorder.Eventf(mz, corev1.EventTypeWarning, ReasonRolloutTimeout, "generation %d did not become leader within %s; removed", desired, timeout)
		return controller.Result{}, r.setUpToDate(ctx, mz, st, metav1.ConditionFalse, ReasonRolloutTimeout,
			prefix+fmt.Sprintf("generation %d did not become leader within %s", desired, timeout))
	}

	if promoting {
		return r.promote(ctx, e, st, started, leader, url, hash, forced)
	}
	if pre.problem != "" {
		// Nothing is created and the active generation keeps serving; the
		// check runs again, since a Secret or ConfigMap is not watched.
		return controller.Result{RequeueAfter: r.o.PreflightRetry}, r.setRolloutCondition(ctx, mz, st, started, ReasonFailedDeploy,
			prefix+fmt.Sprintf("generation %d not started: %s", desired, pre.problem))
	}

	if mz.Spec.RolloutStrategy == v1alpha1.RolloutImmediatelyPromoteCausingDowntime && st.ActiveGeneration > 0 {
		if err := r.deleteGeneration(ctx, e, st.ActiveGeneration); err != nil {
			return controller.Result{}, err
		}
	}
	// As upstream: the recorded hash no longer describes what runs, so a
	// spec reverted mid-rollout is not taken as applied.
	st.ResourcesHash = ""
	if err := r.applyGeneration(ctx, e, desired); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			r.d.Recorder.Eventf(mz, corev1.EventTypeWarning, ReasonFailedDeploy, "generation %d: %v", desired, err)
			// Requeued, so the rollout's timeout still fires.
			return controller.Result{RequeueAfter: r.o.PreflightRetry}, r.setRolloutCondition(ctx, mz, st, started, ReasonFailedDeploy, prefix+err.Error())
		}
		return controller.Result{}, err
	}

	return r.promote(ctx, e, st, started, leader, url, hash, forced)
}

// promote drives environmentd's leader API for the desired generation:
// wait until it is ready (skipping catch-up when forced), record
// Promoting, promote, and once it leads route to it, retire the old
// generation and record the rollout as complete.
func (r *reconciler) promote(ctx context.Context, e env, st v1alpha1.MaterializeStatus, started time.Time,
	leader *environmentd.Client, url, hash string, forced bool) (controller.Result, error) {
	mz := e.mz
	desired := st.ActiveGeneration + 1
	prefix := rolloutPrefix(mz.Spec.RequestRollout)
	note := unversionedNote(mz.Spec.EnvironmentdImageRef)
	poll := controller.Result{RequeueAfter: r.o.PollInterval}
	status, err := leader.Status(ctx, url)
	if err != nil {
		if ctx.Err() != nil {
			return controller.Result{}, ctx.Err()
		}
		reason := ReasonApplying
		if current := meta.FindStatusCondition(mz.Status.Conditions, ConditionUpToDate); current != nil && current.Reason == ReasonPromoting {
			reason = ReasonPromoting
		}
		return poll, r.setRolloutCondition(ctx, mz, st, started, reason,
			prefix+fmt.Sprintf("waiting for generation %d: %v", desired, err)+note)
	}
	switch status {
	case environmentd.Initializing, environmentd.CatchingUp:
		if !forced {
			return poll, r.setRolloutCondition(ctx, mz, st, started, ReasonApplying,
				prefix+fmt.Sprintf("generation %d is %s", desired, status)+note)
		}
		// A forced promotion does not wait for the clusters to catch up.
		if err := leader.SkipCatchup(ctx, url); err != nil {
			return poll, r.setRolloutCondition(ctx, mz, st, started, ReasonApplying,
				prefix+fmt.Sprintf("generation %d is %s: %v", desired, status, err)+note)
		}
		fallthrough
	case environmentd.ReadyToPromote:
		if mz.Spec.RolloutStrategy == v1alpha1.RolloutManuallyPromote && !forced {
			// Upstream's reason, which automation watches for.
			return poll, r.setRolloutCondition(ctx, mz, st, started, ReasonReadyToPromote,
				prefix+fmt.Sprintf("generation %d is ready to promote; set spec.forcePromote to %s (at v1: status.requestedRolloutHash) to promote it", desired, mz.Spec.RequestRollout))
		}
		// Recorded before the call, as upstream: a promotion that was sent
		// must never be cancelled, even if the call's answer is lost.
		if err := r.setRolloutCondition(ctx, mz, st, started, ReasonPromoting, prefix+fmt.Sprintf("promoting generation %d", desired)); err != nil {
			return controller.Result{}, err
		}
		if err := leader.Promote(ctx, url); err != nil {
			return controller.Result{}, fmt.Errorf("promoting generation %d: %w", desired, err)
		}
		return poll, nil
	case environmentd.Promoting:
		return poll, r.setRolloutCondition(ctx, mz, st, started, ReasonPromoting, prefix+fmt.Sprintf("promoting generation %d", desired))
	case environmentd.IsLeader:
	default:
		return poll, fmt.Errorf("generation %d reports unknown status %q", desired, status)
	}

	// The new generation leads: route to it, retire the old one, record it.
	if err := r.applyPublicService(ctx, e, desired); err != nil {
		return controller.Result{}, err
	}
	if old := st.ActiveGeneration; old > 0 && old != desired {
		if err := r.deleteGeneration(ctx, e, old); err != nil {
			return controller.Result{}, err
		}
	}
	st.ActiveGeneration = desired
	st.LastCompletedRolloutRequest = mz.Spec.RequestRollout
	st.LastCompletedRolloutEnvironmentdImageRef = mz.Spec.EnvironmentdImageRef
	st.ResourcesHash = hash
	r.d.Recorder.Eventf(mz, corev1.EventTypeNormal, "RolloutComplete", "generation %d is active (%s)", desired, mz.Spec.EnvironmentdImageRef)
	// The same message as the steady state: the next reconcile writes nothing.
	if err := r.setUpToDate(ctx, mz, st, metav1.ConditionTrue, ReasonApplied, activeMessage(desired)); err != nil {
		return controller.Result{}, err
	}
	// The Balancer and Console applied next follow the image just rolled out.
	mz.Status = st
	return controller.Result{}, nil
}

// forcePromote is upstream's should_force_promote: spec.forcePromote names
// the request (v1alpha1) or the rollout hash (v1), or the strategy promotes
// without waiting.
func (r *reconciler) forcePromote(ctx context.Context, mz *v1alpha1.Materialize) bool {
	if mz.Spec.RolloutStrategy == v1alpha1.RolloutImmediatelyPromoteCausingDowntime {
		return true
	}
	if mz.Spec.ForcePromote == "" {
		return false
	}
	if mz.Spec.ForcePromote == mz.Spec.RequestRollout {
		return true
	}
	// The v1 hash is computed from the stored JSON, as the webhook does.
	stored, err := r.d.MZ.MaterializeV1alpha1().RESTClient().Get().
		Namespace(mz.Namespace).Resource("materializes").Name(mz.Name).DoRaw(ctx)
	if err != nil {
		return false
	}
	hash, err := conversion.V1RolloutHash(stored)
	return err == nil && mz.Spec.ForcePromote == hash
}

// notPromoting tells a timed-out rollout that environmentd is not
// promoting: Promoting is recorded before every promotion, and this asks
// environmentd as well in case that record was lost with a conflict.
func (r *reconciler) notPromoting(ctx context.Context, leader *environmentd.Client, url string) bool {
	status, err := leader.Status(ctx, url)
	return err != nil || (status != environmentd.Promoting && status != environmentd.IsLeader)
}

func activeMessage(gen uint64) string {
	return fmt.Sprintf("generation %d is active and runs the requested spec", gen)
}

// applyGeneration applies a generation's objects in upstream's order: the
// StatefulSet last, so its pod finds its Services and listeners file.
func (r *reconciler) applyGeneration(ctx context.Context, e env, gen uint64) error {
	g := e.generation(gen)
	kube := r.d.Kube
	for _, svc := range []*corev1ac.ServiceApplyConfiguration{g.service, g.persistPubSub} {
		live, err := r.services.Services(e.ns()).Get(*svc.Name)
		if err := applyChild(ctx, live, err, svc, corev1acExtractService, kube.CoreV1().Services(e.ns()).Apply); err != nil {
			return err
		}
	}
	liveCM, err := r.configMaps.ConfigMaps(e.ns()).Get(*g.listeners.Name)
	if err := applyChild(ctx, liveCM, err, g.listeners, corev1acExtractConfigMap, kube.CoreV1().ConfigMaps(e.ns()).Apply); err != nil {
		return err
	}
	liveSTS, err := r.statefulSets.StatefulSets(e.ns()).Get(*g.statefulSet.Name)
	return applyChild(ctx, liveSTS, err, g.statefulSet, appsacExtractStatefulSet, kube.AppsV1().StatefulSets(e.ns()).Apply)
}

func (r *reconciler) applyPublicService(ctx context.Context, e env, gen uint64) error {
	svc := e.publicService(gen)
	live, err := r.services.Services(e.ns()).Get(*svc.Name)
	return applyChild(ctx, live, err, svc, corev1acExtractService, r.d.Kube.CoreV1().Services(e.ns()).Apply)
}

// deleteGeneration removes a generation's objects that still exist.
func (r *reconciler) deleteGeneration(ctx context.Context, e env, gen uint64) error {
	name, ns := e.generationName(gen), e.ns()
	del := func(exists bool, remove func(context.Context, string, metav1.DeleteOptions) error, n string) error {
		if !exists {
			return nil
		}
		err := remove(ctx, n, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	_, err := r.statefulSets.StatefulSets(ns).Get(name)
	if err := del(err == nil, r.d.Kube.AppsV1().StatefulSets(ns).Delete, name); err != nil {
		return err
	}
	for _, svc := range []string{name, e.persistPubSubName(gen)} {
		_, err = r.services.Services(ns).Get(svc)
		if err := del(err == nil, r.d.Kube.CoreV1().Services(ns).Delete, svc); err != nil {
			return err
		}
	}
	_, err = r.configMaps.ConfigMaps(ns).Get(e.listenersName(gen))
	return del(err == nil, r.d.Kube.CoreV1().ConfigMaps(ns).Delete, e.listenersName(gen))
}

// setRolloutCondition reports a rollout in progress; the condition's
// lastTransitionTime marks when the rollout started (for the timeout).
func (r *reconciler) setRolloutCondition(ctx context.Context, mz *v1alpha1.Materialize, st v1alpha1.MaterializeStatus, started time.Time, reason, msg string) error {
	st.Conditions = cloneConditions(st.Conditions)
	// In progress is Unknown, as upstream; a failed deploy is False.
	status := metav1.ConditionUnknown
	if reason == ReasonFailedDeploy {
		status = metav1.ConditionFalse
	}
	cond := metav1.Condition{Type: ConditionUpToDate, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: mz.Generation, LastTransitionTime: metav1.NewTime(started.Truncate(time.Second))}
	if existing := meta.FindStatusCondition(st.Conditions, ConditionUpToDate); existing != nil && existing.Status != metav1.ConditionTrue &&
		strings.HasPrefix(existing.Message, rolloutPrefix(mz.Spec.RequestRollout)) {
		cond.LastTransitionTime = existing.LastTransitionTime
	}
	meta.RemoveStatusCondition(&st.Conditions, ConditionUpToDate)
	st.Conditions = append(st.Conditions, cond)
	return r.writeStatusWithEvent(ctx, mz, st)
}

func (r *reconciler) setUpToDate(ctx context.Context, mz *v1alpha1.Materialize, st v1alpha1.MaterializeStatus, status metav1.ConditionStatus, reason, msg string) error {
	st.Conditions = cloneConditions(st.Conditions)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionUpToDate, Status: status, Reason: reason,
		Message: msg, ObservedGeneration: mz.Generation})
	return r.writeStatusWithEvent(ctx, mz, st)
}

func (r *reconciler) writeStatusWithEvent(ctx context.Context, mz *v1alpha1.Materialize, st v1alpha1.MaterializeStatus) error {
	before := meta.FindStatusCondition(mz.Status.Conditions, ConditionUpToDate)
	wrote, err := r.writeStatus(ctx, mz, st)
	if err != nil || !wrote {
		return err
	}
	after := meta.FindStatusCondition(st.Conditions, ConditionUpToDate)
	if after != nil && (before == nil || before.Reason != after.Reason || before.Status != after.Status) {
		kind := corev1.EventTypeNormal
		if after.Reason == ReasonFailedDeploy || after.Reason == ReasonRolloutTimeout {
			kind = corev1.EventTypeWarning
		}
		r.d.Recorder.Event(mz, kind, after.Reason, after.Message)
	}
	return nil
}

// writeStatus applies the whole status unless the live one already equals it.
func (r *reconciler) writeStatus(ctx context.Context, live *v1alpha1.Materialize, st v1alpha1.MaterializeStatus) (bool, error) {
	// Empty fields stay out of the apply, as they stay out of the JSON.
	status := mzac.MaterializeStatus().WithResourceID(st.ResourceID).WithObservedGeneration(st.ObservedGeneration)
	if st.ActiveGeneration > 0 {
		status.WithActiveGeneration(st.ActiveGeneration)
	}
	if st.LastCompletedRolloutRequest != "" {
		status.WithLastCompletedRolloutRequest(st.LastCompletedRolloutRequest)
	}
	if st.LastCompletedRolloutEnvironmentdImageRef != "" {
		status.WithLastCompletedRolloutEnvironmentdImageRef(st.LastCompletedRolloutEnvironmentdImageRef)
	}
	if st.ResourcesHash != "" {
		status.WithResourcesHash(st.ResourcesHash)
	}
	if st.LastCompletedRolloutHash != "" {
		status.WithLastCompletedRolloutHash(st.LastCompletedRolloutHash)
	}
	for _, c := range st.Conditions {
		status.WithConditions(ctrlcomponent.ConditionApplyConfiguration(c))
	}
	desired := mzac.Materialize(live.Name, live.Namespace).WithStatus(status)
	if apply.Subset(mustJSON(desired.Status), mustJSON(live.Status)) && len(st.Conditions) == len(live.Status.Conditions) {
		return false, nil
	}

	_, err := r.d.MZ.MaterializeV1alpha1().Materializes(live.Namespace).ApplyStatus(ctx, desired, apply.Options())
	return err == nil, err
}

func cloneConditions(c []metav1.Condition) []metav1.Condition {
	return append([]metav1.Condition(nil), c...)
}

func ptr[T any](v T) *T { return &v }

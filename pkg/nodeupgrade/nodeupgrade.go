// Package nodeupgrade moves Materialize environments off nodes that are going
// away. Given those nodes (already cordoned), it finds the Materializes whose
// environmentd or clusterd pods run on them and requests one forced rollout
// of each: the new generation can only be scheduled elsewhere, and the old
// one is retired gracefully once the new one is ready, before the nodes are
// drained. Deciding that nodes are going away (a GKE node-pool upgrade, say)
// is the caller's; this package is cloud-neutral.
package nodeupgrade

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/kubeclient"
	mzlabels "github.com/materializeinc/orchestratord/pkg/labels"
)

// PodSelector is upstream's selector of the pods that must be moved before
// their node goes away: environmentd and clusterd, which the rollout
// machinery moves between generations. balancerd and the console are
// stateless Deployments and are drained normally.
const PodSelector = mzlabels.K8sName + " in (environmentd,clusterd)," +
	mzlabels.OrganizationName + "," + mzlabels.OrganizationNamespace

// DefaultCooldown is upstream's minimum time between two triggers for one
// Materialize.
const DefaultCooldown = 5 * time.Minute

// Bounds on what one scan reads: a cluster can be large (GKE allows 15 000
// nodes) but never makes a scan unbounded.
const (
	pageSize = 500
	// podPageSize is smaller: anyone who can create pods can label theirs
	// as environmentd's, each up to the API server's 1.5 MiB limit.
	podPageSize = 50
	// perNodeListing: up to this many nodes going away (a pool's surge),
	// their pods are read node by node (the API server indexes pods by
	// spec.nodeName), so pods on other nodes, any tenant's, cost nothing.
	perNodeListing = 32
	// MaxNodes bounds the nodes one scan considers.
	MaxNodes = 15000
	// MaxPods bounds the data-plane pods one scan considers.
	MaxPods = 100000
)

// Instance names a Materialize.
type Instance struct{ Namespace, Name string }

func (i Instance) String() string { return i.Namespace + "/" + i.Name }

// Trigger requests forced rollouts. Its writes use the context given to
// RollOut, which must be the lead context of the materialize controller's
// Lease, and the clients must be the fenced ones: a write is then refused
// once the term could have ended.
type Trigger struct {
	Kube kubeclient.Interface
	MZ   versioned.Interface
	Log  *zap.Logger
	// Cooldown is the minimum time between two triggers for one
	// Materialize, whatever the scope (DefaultCooldown when zero). The
	// rollout a trigger requests is visible at once in the stored object,
	// but two scopes (two pools upgrading together) must not each start one.
	Cooldown time.Duration
	// Now and NewValue are the clock and the force-rollout values (random
	// UUIDs, as upstream's); tests replace them.
	Now      func() time.Time
	NewValue func() string
	// Metrics, when set, counts the triggers' decisions and failures.
	Metrics *Metrics

	mu   sync.Mutex
	last map[Instance]time.Time
	// done remembers, per scope (one upgrade of one pool, say), the
	// Materializes already triggered: each gets one forced rollout per
	// scope, even if pods of it are still on the nodes once that rollout
	// has completed.
	done map[string]map[Instance]bool
	// id names this Trigger in its records; released is, per
	// Materialize, when Retain let go of it. See othersRecord.
	id       string
	released map[Instance]time.Time
}

func (t *Trigger) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func (t *Trigger) cooldown() time.Duration {
	if t.Cooldown > 0 {
		return t.Cooldown
	}
	return DefaultCooldown
}

func (t *Trigger) log() *zap.Logger {
	if t.Log != nil {
		return t.Log
	}
	return zap.NewNop()
}

// othersRecord tells whether rec, recorded on inst, is a trigger this
// Trigger does not know of: one another leader of the materialize Lease
// made (this process's own are in its memory, across its terms), that
// this Trigger has not since let go of (Retain).
func (t *Trigger) othersRecord(inst Instance, rec *triggerRecord) bool {
	if rec == nil {
		return false
	}
	id := t.identity()
	t.mu.Lock()
	defer t.mu.Unlock()
	return rec.By != id && rec.At.After(t.released[inst])
}

// identity is this Trigger's id in the records it writes.
func (t *Trigger) identity() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.id == "" {
		t.id = uuid.NewString()
	}
	return t.id
}

func (t *Trigger) markDone(scope string, inst Instance) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done == nil {
		t.done = map[string]map[Instance]bool{}
	}
	if t.done[scope] == nil {
		t.done[scope] = map[Instance]bool{}
	}
	t.done[scope][inst] = true
}

// Forget ends a scope: a later one triggers its Materializes again.
func (t *Trigger) Forget(scope string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.done, scope)
}

// Retain keeps in scope only the Materializes in affected: one that no
// longer has pods on the nodes going away is forgotten, so that nodes
// marked again later trigger it again.
func (t *Trigger) Retain(scope string, affected map[Instance][]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for inst := range t.done[scope] {
		if _, ok := affected[inst]; !ok {
			delete(t.done[scope], inst)
			// A previous leader's record of it decides nothing either.
			if t.released == nil {
				t.released = map[Instance]time.Time{}
			}
			t.released[inst] = t.now()
		}
	}

}

// Nodes lists the nodes matching selector for which keep is true, page by
// page, at most MaxNodes of them.
func (t *Trigger) Nodes(ctx context.Context, selector string, keep func(*corev1.Node) bool) (map[string]bool, error) {
	out := map[string]bool{}
	opts := metav1.ListOptions{LabelSelector: selector, Limit: pageSize}
	for seen := 0; ; {
		list, err := t.Kube.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing nodes %q: %w", selector, err)
		}
		for i := range list.Items {
			if keep(&list.Items[i]) {
				out[list.Items[i].Name] = true
			}
		}
		seen += len(list.Items)
		if list.Continue == "" {
			return out, nil
		}
		if seen >= MaxNodes {
			t.log().Warn("node upgrade: too many nodes; considering only the first ones",
				zap.String("selector", selector), zap.Int("limit", MaxNodes))
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

// Affected lists the data-plane pods (PodSelector), page by page, and
// returns the Materializes with a pod on one of nodes, each with those
// nodes: the pods of each node when there are few, else all of them.
func (t *Trigger) Affected(ctx context.Context, nodes map[string]bool) (map[Instance][]string, error) {
	out := map[Instance][]string{}
	if len(nodes) == 0 {
		return out, nil
	}
	seen := 0
	if len(nodes) > perNodeListing {
		if err := t.addPods(ctx, "", nodes, out, &seen); err != nil {
			return nil, err
		}
		return out, nil
	}
	names := make([]string, 0, len(nodes))
	for node := range nodes {
		names = append(names, node)
	}
	sort.Strings(names)
	for _, node := range names {
		if seen >= MaxPods {
			t.tooManyPods()
			break
		}
		if err := t.addPods(ctx, fields.OneTermEqualSelector("spec.nodeName", node).String(), nodes, out, &seen); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// addPods adds to out the Materializes of the data-plane pods matching
// fieldSelector that run on nodes, page by page, while seen (the pods
// read by the scan) stays under MaxPods.
func (t *Trigger) addPods(ctx context.Context, fieldSelector string, nodes map[string]bool, out map[Instance][]string, seen *int) error {
	opts := metav1.ListOptions{LabelSelector: PodSelector, FieldSelector: fieldSelector, Limit: podPageSize}
	for {
		list, err := t.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("listing environmentd and clusterd pods: %w", err)
		}
		addAffected(out, list.Items, nodes)
		*seen += len(list.Items)
		if list.Continue == "" {
			return nil
		}
		if *seen >= MaxPods {
			t.tooManyPods()
			return nil
		}
		opts.Continue = list.Continue
	}
}

func (t *Trigger) tooManyPods() {
	t.log().Warn("node upgrade: too many environmentd and clusterd pods; considering only the first ones", zap.Int("limit", MaxPods))
}

// addAffected adds to out the Materializes of pods running on nodes.
func addAffected(out map[Instance][]string, pods []corev1.Pod, nodes map[string]bool) {
	for i := range pods {
		p := &pods[i]
		// A terminating pod is the old generation going away after a
		// rollout: it must not request another one.
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if !nodes[p.Spec.NodeName] {
			continue
		}
		ns, name := p.Labels[mzlabels.OrganizationNamespace], p.Labels[mzlabels.OrganizationName]
		// environmentd and its clusterd pods live in the Materialize's
		// namespace. A pod naming another namespace's Materialize (anyone
		// who can create pods can label them) must not roll it out.
		if name == "" || ns != p.Namespace {
			continue
		}
		inst := Instance{Namespace: ns, Name: name}
		if nodesOf := out[inst]; !containsString(nodesOf, p.Spec.NodeName) {
			out[inst] = append(nodesOf, p.Spec.NodeName)
		}
	}
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Outcome is what RollOut did for one Materialize.
type Outcome string

const (
	Triggered   Outcome = "triggered"
	AlreadyDone Outcome = "already triggered in this scope"
	CoolingDown Outcome = "in the trigger cooldown"
	InProgress  Outcome = "a rollout is already in progress"
	Gone        Outcome = "the Materialize no longer exists"
	Deleting    Outcome = "the Materialize is being deleted"
	Failed      Outcome = "failed"
)

// label is the outcome as a metric label value.
func (o Outcome) label() string {
	switch o {
	case Triggered:
		return "triggered"
	case AlreadyDone:
		return "already_triggered"
	case CoolingDown:
		return "cooling_down"
	case InProgress:
		return "in_progress"
	case Gone:
		return "gone"
	case Deleting:
		return "deleting"
	}
	return "failed"
}

// RollOut requests one forced rollout of each affected Materialize, unless
// it was already triggered in scope, was triggered by any scope within the
// cooldown, or has a rollout in progress. reason says why, for the log.
// Failures are logged and retried by the next call.
func (t *Trigger) RollOut(ctx context.Context, scope, reason string, affected map[Instance][]string) map[Instance]Outcome {
	insts := make([]Instance, 0, len(affected))
	for inst := range affected {
		insts = append(insts, inst)
	}
	sort.Slice(insts, func(i, j int) bool { return insts[i].String() < insts[j].String() })
	out := make(map[Instance]Outcome, len(insts))
	for _, inst := range insts {
		if ctx.Err() != nil {
			break
		}
		nodes := affected[inst]
		sort.Strings(nodes)
		log := t.log().With(zap.String("namespace", inst.Namespace), zap.String("name", inst.Name),
			zap.String("scope", scope), zap.Strings("nodes", nodes))
		outcome, value, err := t.rollOut(ctx, scope, inst)
		out[inst] = outcome
		t.Metrics.rollout(scope, outcome)
		switch outcome {
		case Triggered:
			log.Info("node upgrade: triggering rollout: the Materialize has pods on nodes going away",
				zap.String("reason", reason), zap.String("forceRollout", value))
		case Failed:
			log.Warn("node upgrade: failed to trigger rollout; retrying at the next scan", zap.Error(err))
		case Gone:
			log.Warn("node upgrade: pods on nodes going away belong to a Materialize that no longer exists")
		default:
			log.Debug("node upgrade: not triggering rollout", zap.String("because", string(outcome)))
		}
	}
	return out
}

func (t *Trigger) rollOut(ctx context.Context, scope string, inst Instance) (Outcome, string, error) {
	t.mu.Lock()
	if t.done[scope][inst] {
		t.mu.Unlock()
		return AlreadyDone, "", nil
	}
	if at, ok := t.last[inst]; ok && t.now().Sub(at) < t.cooldown() {
		t.mu.Unlock()
		return CoolingDown, "", nil
	}
	t.mu.Unlock()

	// The decision and the patch are made on a fresh read of the stored
	// object, and the patch carries its resourceVersion: a change in
	// between (a rollout requested by someone else) conflicts instead of
	// being overridden.
	stored, err := conversion.ReadStored(ctx, t.MZ.MaterializeV1alpha1().RESTClient(), inst.Namespace, inst.Name)
	if apierrors.IsNotFound(err) {
		return Gone, "", nil
	}
	if err != nil {
		return Failed, "", fmt.Errorf("reading the Materialize: %w", err)
	}
	state, err := readState(stored)
	if err != nil {
		return Failed, "", err
	}
	now := t.now()
	switch {
	case state.deleting:
		return Deleting, "", nil
	case state.rolloutInProgress:
		return InProgress, "", nil
	case t.othersRecord(inst, state.triggered) && state.triggered.Scope == scope:
		t.markDone(scope, inst) // so that Retain lets go of it as of its own
		return AlreadyDone, "", nil
	case t.othersRecord(inst, state.triggered) && now.Sub(state.triggered.At) < t.cooldown():
		return CoolingDown, "", nil
	}
	value := uuid.NewString()
	if t.NewValue != nil {
		value = t.NewValue()
	}
	patch, err := forceRolloutPatch(stored, value, triggerRecord{Scope: scope, At: now.UTC(), By: t.identity()})
	if err != nil {
		return Failed, "", err
	}
	if _, err := t.MZ.MaterializeV1alpha1().Materializes(inst.Namespace).Patch(ctx, inst.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return Failed, "", fmt.Errorf("patching the Materialize: %w", err)
	}
	t.markDone(scope, inst)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[Instance]time.Time{}
	}
	t.last[inst] = now
	// Entries past their cooldown decide nothing: drop them, so the map
	// holds only recent triggers.
	for k, at := range t.last {
		if now.Sub(at) >= t.cooldown() {
			delete(t.last, k)
		}
	}
	return Triggered, value, nil
}

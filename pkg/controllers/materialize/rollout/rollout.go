// Package rollout is the materialize reconciler's rollout state machine, as
// a pure function. Step takes a Materialize's spec and status and what the
// reconciler observed (the generation's readiness, environmentd's leader
// status, why a generation cannot start) and returns the new status and the
// actions to take, in order. It does no I/O, so every row of its table
// (docs/rollout.md) is a unit test.
//
// The semantics are upstream orchestratord's (controller/materialize.rs):
// its conditions, reasons and messages, its point of no return (Promoting),
// its timeout. What upstream reads back from the UpToDate condition is typed
// here, in status.rollout: the request, generation and image being rolled
// out, when the rollout started and when its promotion was first sent.
package rollout

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/boundedtext"
	"github.com/materializeinc/orchestratord/pkg/humantime"
)

// The UpToDate condition and its reasons, upstream's.
const (
	ConditionUpToDate        = "UpToDate"
	ReasonApplied            = "Applied"
	ReasonApplying           = "Applying"
	ReasonReadyToPromote     = "ReadyToPromote"
	ReasonPromoting          = "Promoting"
	ReasonWaitingForApproval = "WaitingForApproval"
	ReasonFailedDeploy       = "FailedDeploy"
	ReasonRolloutTimeout     = "RolloutTimeout"
)

// environmentd's leader API statuses.
const (
	Initializing   = "Initializing"
	CatchingUp     = "CatchingUp"
	ReadyToPromote = "ReadyToPromote"
	Promoting      = "Promoting"
	IsLeader       = "IsLeader"
)

// Input is everything Step decides on.
type Input struct {
	Now time.Time
	// MetaGeneration is metadata.generation, the conditions' observedGeneration.
	MetaGeneration int64
	// Request is spec.requestRollout, Image spec.environmentdImageRef.
	Request, Image string
	// ManuallyPromote is spec.rolloutStrategy ManuallyPromote;
	// DeleteActiveFirst is ImmediatelyPromoteCausingDowntime.
	ManuallyPromote, DeleteActiveFirst bool
	// Forced is upstream's should_force_promote: spec.forcePromote names the
	// request (or the v1 rollout hash), or the strategy promotes at once.
	// A forced rollout skips catch-up and never times out.
	Forced bool
	// Timeout is spec.rolloutRequestTimeout.
	Timeout time.Duration
	// Retry is how soon a rollout that cannot go on (FailedDeploy) looks again.
	Retry time.Duration
	// Status is the Materialize's status.
	Status v1alpha1.MaterializeStatus
	// Hash is the hash of the generation objects the spec asks for.
	Hash string
	// Blocked, when set, is why a new generation cannot start (pre-flight):
	// nothing is created and the active generation keeps serving.
	Blocked string
	// ApplyFailed, when set, is why the API server refused the generation's
	// objects; Step is called again with it after an ApplyGeneration failed.
	ApplyFailed string
	// Desired is what was observed of the generation being rolled out.
	Desired Observation
	// Note is appended to the messages of a rollout in progress.
	Note string
	// QuietFor is how long a rollout runs before a status write whose only
	// news is the UpToDate message (environmentd's progress, what the pods
	// wait for) is made: a rollout quicker than that writes its status at
	// its transitions only (Applying, Promoting, Applied), as upstream does.
	// Zero or negative writes every change.
	QuietFor time.Duration
	// Also are conditions of other concerns (LicenseKey), set on the status
	// Step returns: a change of one is news, written at once.
	Also []metav1.Condition
}

// Observation is the generation being rolled out, as the reconciler saw it.
type Observation struct {
	// Ready: its StatefulSet has a ready replica (upstream asks environmentd
	// only then).
	Ready bool
	// Leader is environmentd's leader status, when asked and answered.
	Leader string
	// LeaderErr is why asking failed: unreachable, or an answer that is not
	// a leader status.
	LeaderErr string
	// Waiting, when set, is what the generation's pods wait for (a pod that
	// cannot start, clusterd replicas catching up): it completes the
	// condition's message, bounded and free of secrets.
	Waiting string
}

// ActionKind is something the reconciler does.
type ActionKind int

const (
	// DeleteGeneration tears down Generation's objects (those that exist).
	DeleteGeneration ActionKind = iota
	// ApplyGeneration applies Generation's objects.
	ApplyGeneration
	// WriteStatus writes Output.Status (a no-op when the live status equals
	// it); actions after it run only once it is written.
	WriteStatus
	// SkipCatchup asks Generation's environmentd not to wait for its
	// clusters to catch up.
	SkipCatchup
	// Promote asks Generation's environmentd to take over as leader.
	Promote
	// Route points the environment's public Service at Generation.
	Route
)

var actionNames = [...]string{"DeleteGeneration", "ApplyGeneration", "WriteStatus", "SkipCatchup", "Promote", "Route"}

func (k ActionKind) String() string { return actionNames[k] }

// Action is one step of an Output, done in order.
type Action struct {
	Kind       ActionKind
	Generation uint64
}

func (a Action) String() string {
	if a.Kind == WriteStatus {
		return a.Kind.String()
	}
	return fmt.Sprintf("%s(%d)", a.Kind, a.Generation)
}

// Output is what Step decided.
type Output struct {
	Status  v1alpha1.MaterializeStatus
	Actions []Action
	// Poll: the rollout waits on the generation or on environmentd; look
	// again after the poll interval. The Balancer and Console wait too.
	Poll bool
	// RecheckAfter, when positive and not polling, is when something is due
	// without an event: the rollout's timeout, or a FailedDeploy's retry.
	RecheckAfter time.Duration
}

// InProgress reports the rollout in progress recorded in st, if any. A
// status without status.rollout was written by upstream orchestratord (a
// switch mid-rollout) or by an older version of this operator: there, an
// UpToDate condition that is Unknown is a rollout in progress since its
// lastTransitionTime, and Promoting is past the point of no return.
func InProgress(st v1alpha1.MaterializeStatus, request, image string) (v1alpha1.MaterializeRolloutStatus, bool) {
	if r := st.Rollout; r != nil {
		if r.Generation != st.ActiveGeneration+1 {
			return v1alpha1.MaterializeRolloutStatus{}, false // completed already
		}
		return *r, true
	}
	c := upToDate(st)
	if c == nil || c.Status != metav1.ConditionUnknown {
		return v1alpha1.MaterializeRolloutStatus{}, false
	}
	r := v1alpha1.MaterializeRolloutStatus{Request: request, EnvironmentdImageRef: image,
		Generation: st.ActiveGeneration + 1, StartedAt: c.LastTransitionTime}
	if c.Reason == ReasonPromoting {
		r.PromotionSentAt = &c.LastTransitionTime
	}
	return r, true
}

// Pending tells the reconciler whether Step will roll a generation out (or
// go on promoting one), and which: it then checks whether the generation
// can start and asks for its Observation.
func Pending(in Input) (generation uint64, pending bool) {
	p, inProgress := InProgress(in.Status, in.Request, in.Image)
	if inProgress && p.PromotionSentAt != nil {
		return p.Generation, true
	}
	return in.Status.ActiveGeneration + 1, changes(in, inProgress) && requested(in)
}

// changes is upstream's has_current_changes: the spec asks for objects the
// active generation does not run, or a rollout has begun (upstream hashes a
// generation's objects with its number, so a begun rollout always differs).
func changes(in Input, inProgress bool) bool {
	return inProgress || in.Hash != in.Status.ResourcesHash
}

// requested is upstream's rollout_requested.
func requested(in Input) bool { return in.Request != in.Status.LastCompletedRolloutRequest }

// HashScheme starts every resourcesHash this operator computes. Upstream
// hashes its own serialization of the generation's objects, which no other
// implementation reproduces; the prefix tells a hash this operator can
// compare from one it can only adopt (see adopts).
const HashScheme = "og1:"

// adopts reports whether the status's resourcesHash, computed by someone
// else (upstream orchestratord, or an earlier scheme of this operator),
// stands for what the spec asks for now: the UpToDate condition, written for
// this very metadata.generation, says Applied, so its writer found no
// changes in this spec, and no rollout is under way. The hash is then
// replaced by this operator's own for the same spec, instead of reading as
// a change (WaitingForApproval, or a needless rollout on the next request).
func adopts(in Input, inProgress bool) bool {
	if inProgress || in.Status.ResourcesHash == "" || strings.HasPrefix(in.Status.ResourcesHash, HashScheme) {
		return false
	}
	c := upToDate(in.Status)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonApplied && c.ObservedGeneration == in.MetaGeneration
}

// Step is the state machine: one reconcile's decision.
func Step(in Input) Output {
	if _, inProgress := InProgress(in.Status, in.Request, in.Image); adopts(in, inProgress) {
		in.Status.ResourcesHash = in.Hash
	}
	st := in.Status
	st.ObservedGeneration = in.MetaGeneration
	st.Conditions = append([]metav1.Condition(nil), st.Conditions...)
	for _, c := range in.Also {
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if st.Rollout != nil {
		r := *st.Rollout
		st.Rollout = &r
	}
	p, inProgress := InProgress(in.Status, in.Request, in.Image)
	switch {
	case inProgress && p.PromotionSentAt != nil:
		return promoting(in, st, p)
	case changes(in, inProgress) && requested(in):
		return rollingOut(in, st, p, inProgress)
	default:
		return settled(in, st, inProgress)
	}
}

// settled: nothing to roll out, either because nothing changed or because
// no rollout was requested. The status is written first (conditional on
// the resourceVersion decided on); then the generations either side of the
// active one go if they exist: one begun for a request that was withdrawn
// (it would hold back compaction) or timed out, one retired by a promotion
// whose delete did not complete.
func settled(in Input, st v1alpha1.MaterializeStatus, inProgress bool) Output {
	active := st.ActiveGeneration
	// As upstream, the condition is rewritten only when the spec changed
	// since it was written, a rollout was torn down or a request arrived:
	// a RolloutTimeout stays until the user does something.
	if conditionsNeedUpdate(in) || inProgress || requested(in) {
		if changes(in, false) {
			setCondition(&st, in, metav1.ConditionFalse, ReasonWaitingForApproval,
				fmt.Sprintf("Changes detected, waiting for approval for generation %d", active+1))
		} else {
			setCondition(&st, in, metav1.ConditionTrue, ReasonApplied, fmt.Sprintf("No changes found from generation %d", active))
		}
	}
	st.LastCompletedRolloutRequest = in.Request
	st.Rollout = nil
	out := Output{Status: st, Actions: []Action{{Kind: WriteStatus}, {DeleteGeneration, active + 1}}}
	if active > 1 {
		out.Actions = append(out.Actions, Action{DeleteGeneration, active - 1})
	}
	if active > 0 {
		out.Actions = append(out.Actions, Action{Route, active})
	}
	return out
}

// rollingOut: a requested rollout that has not been sent a promotion.
func rollingOut(in Input, st v1alpha1.MaterializeStatus, p v1alpha1.MaterializeRolloutStatus, inProgress bool) Output {
	active := st.ActiveGeneration
	desired := active + 1
	obs := in.Desired
	if obs.Ready && (obs.Leader == Promoting || obs.Leader == IsLeader) {
		// environmentd is taking over (a promotion whose record was lost,
		// or one sent by hand): past the point of no return, whatever the
		// clock or the strategy says.
		if !inProgress {
			p = v1alpha1.MaterializeRolloutStatus{Request: in.Request, EnvironmentdImageRef: in.Image, Generation: desired,
				StartedAt: metav1.NewTime(in.Now.Truncate(time.Second))}
		}
		sent := metav1.NewTime(in.Now.Truncate(time.Second))
		p.PromotionSentAt = &sent
		return promoting(in, st, p)
	}
	starting := !inProgress || p.Request != in.Request
	if starting {
		// A new request restarts the clock: the timeout is the request's.
		p = v1alpha1.MaterializeRolloutStatus{Generation: desired, StartedAt: metav1.NewTime(in.Now.Truncate(time.Second))}
	}
	p.Request, p.EnvironmentdImageRef = in.Request, in.Image
	deadline := p.StartedAt.Add(in.Timeout)

	// Cancelled past the timeout, unless forced: by then the active
	// generation may be gone (ImmediatelyPromoteCausingDowntime). The
	// status goes first, so a decision made on a stale copy conflicts
	// before anything is deleted.
	if !starting && !in.Forced && !in.Now.Before(deadline) {
		setCondition(&st, in, metav1.ConditionFalse, ReasonRolloutTimeout,
			fmt.Sprintf("Cancelled rollout to generation %d after it exceeded the rollout timeout of %s", desired, humantime.Format(in.Timeout)))
		// Completed, so it is not retried: a new request retries.
		st.LastCompletedRolloutRequest = in.Request
		st.Rollout = nil
		return Output{Status: st, Actions: []Action{{Kind: WriteStatus}, {DeleteGeneration, desired}}}
	}
	recheck := in.Retry
	if !starting && !in.Forced {
		recheck = min(recheck, deadline.Sub(in.Now))
	}
	if in.Blocked != "" {
		// Nothing is created; a rollout already begun keeps its clock.
		st.Rollout = nil
		if inProgress {
			st.Rollout = &p
		}
		setCondition(&st, in, metav1.ConditionFalse, ReasonFailedDeploy, in.Blocked)
		return Output{Status: st, Actions: []Action{{Kind: WriteStatus}}, RecheckAfter: recheck}
	}
	st.Rollout = &p
	// As upstream: the recorded hash does not describe what runs until the
	// generation is ready, so a spec reverted meanwhile is not taken as
	// applied, and a rollout that fails half-way is retried.
	st.ResourcesHash = ""
	if in.ApplyFailed != "" {
		setCondition(&st, in, metav1.ConditionFalse, ReasonFailedDeploy,
			fmt.Sprintf("Failed to apply changes for generation %d: %s", desired, in.ApplyFailed))
		return Output{Status: st, Actions: []Action{{Kind: WriteStatus}}, RecheckAfter: recheck}
	}
	if starting && obs.Ready {
		// A generation left running by an earlier attempt: recorded first,
		// and observed afresh by the next step.
		setCondition(&st, in, metav1.ConditionUnknown, ReasonApplying, fmt.Sprintf("Applying changes for generation %d", desired)+in.Note)
		return Output{Status: st, Actions: []Action{{Kind: WriteStatus}}, Poll: true}
	}

	var out Output
	if starting {
		// Recorded before anything is deleted or applied: a rollout that
		// fails from here on is in progress (its clock runs, its condition
		// says so), never mistaken for the settled state it left. The
		// status written is the one the apply leads to (waiting for the
		// pod), so the step after it has nothing to rewrite: one status
		// write per transition.
		out.Actions = append(out.Actions, Action{Kind: WriteStatus})
	}
	if in.DeleteActiveFirst && active > 0 {
		// The only reason to choose this strategy is having no room for two
		// generations: the old one goes first.
		out.Actions = append(out.Actions, Action{DeleteGeneration, active})
	}
	out.Actions = append(out.Actions, Action{ApplyGeneration, desired})
	applying := func(detail string) Output {
		setCondition(&st, in, metav1.ConditionUnknown, ReasonApplying,
			fmt.Sprintf("Applying changes for generation %d: %s", desired, detail)+in.Note)
		out.Status = st
		if !starting && !quiet(in, st, p) {
			out.Actions = append(out.Actions, Action{Kind: WriteStatus})
		}
		out.Poll = true
		return out
	}
	switch {
	case !obs.Ready && obs.Waiting != "":
		return applying("waiting for its pod to be ready: " + obs.Waiting)
	case !obs.Ready:
		return applying("waiting for its pod to be ready")
	case obs.LeaderErr != "":
		return applying(obs.LeaderErr)
	case !validLeaderStatus(obs.Leader):
		return applying(fmt.Sprintf("environmentd reports unknown leader status %q", obs.Leader))
	case obs.Leader == Initializing || obs.Leader == CatchingUp:
		if in.Forced {
			// A forced rollout does not wait for the clusters to catch up;
			// it promotes once environmentd says it is ready.
			out.Actions = append(out.Actions, Action{SkipCatchup, desired})
			return applying("environmentd is " + obs.Leader + "; skipping catch-up")
		}
		if obs.Waiting != "" {
			return applying("environmentd is " + obs.Leader + " (" + obs.Waiting + ")")
		}
		return applying("environmentd is " + obs.Leader)
	}
	// environmentd is ReadyToPromote.
	st.ResourcesHash = in.Hash
	if in.ManuallyPromote && !in.Forced {
		// Upstream's reason, which automation watches for; the clock keeps
		// running, so the check comes back at the deadline.
		setCondition(&st, in, metav1.ConditionUnknown, ReasonReadyToPromote, fmt.Sprintf("Ready to promote generation %d", desired))
		out.Status = st
		out.Actions = append(out.Actions, Action{Kind: WriteStatus})
		out.RecheckAfter = deadline.Sub(in.Now)
		return out
	}
	// The point of no return is recorded before the call: a promotion that
	// was sent is never cancelled, even if the call's answer is lost.
	sent := metav1.NewTime(in.Now.Truncate(time.Second))
	p.PromotionSentAt = &sent
	setCondition(&st, in, metav1.ConditionUnknown, ReasonPromoting, fmt.Sprintf("Attempting to promote generation %d", desired))
	out.Status = st
	out.Actions = append(out.Actions, Action{Kind: WriteStatus}, Action{Promote, desired})
	out.Poll = true
	return out
}

// promoting: past the point of no return, the rollout only promotes. It
// never times out and never tears the generation down.
func promoting(in Input, st v1alpha1.MaterializeStatus, p v1alpha1.MaterializeRolloutStatus) Output {
	active := st.ActiveGeneration
	desired := p.Generation
	st.Rollout = &p
	out := Output{Poll: true}
	waiting := func(detail string) Output {
		setCondition(&st, in, metav1.ConditionUnknown, ReasonPromoting,
			fmt.Sprintf("Attempting to promote generation %d: %s", desired, detail))
		out.Status = st
		if !quiet(in, st, p) {
			out.Actions = append(out.Actions, Action{Kind: WriteStatus})
		}
		return out
	}
	obs := in.Desired
	switch {
	case !obs.Ready:
		return waiting("waiting for its pod to be ready")
	case obs.LeaderErr != "":
		return waiting(obs.LeaderErr)
	case obs.Leader == ReadyToPromote:
		// The promotion was lost (environmentd restarted, or the call
		// never arrived): send it again.
		out.Actions = append(out.Actions, Action{Promote, desired})
		return waiting("promotion sent again")
	case obs.Leader == Initializing || obs.Leader == CatchingUp:
		if in.Forced {
			out.Actions = append(out.Actions, Action{SkipCatchup, desired})
		}
		return waiting("environmentd is " + obs.Leader)
	case obs.Leader == Promoting:
		return waiting("environmentd is Promoting")
	case obs.Leader != IsLeader:
		return waiting(fmt.Sprintf("environmentd reports unknown leader status %q", obs.Leader))
	}

	// The new generation leads: route to it, record it, retire the old one.
	// What is recorded is what was promoted (the request and image of the
	// rollout), even if the spec moved on meanwhile: that is a new rollout.
	st.ActiveGeneration = desired
	st.LastCompletedRolloutRequest = p.Request
	st.LastCompletedRolloutEnvironmentdImageRef = p.EnvironmentdImageRef
	if in.Status.Rollout == nil || st.ResourcesHash == "" {
		// Adopted from a status without status.rollout (upstream's, whose
		// hash is computed differently): the spec's, as upstream records.
		st.ResourcesHash = in.Hash
	}
	st.Rollout = nil
	setCondition(&st, in, metav1.ConditionTrue, ReasonApplied, fmt.Sprintf("Successfully applied changes for generation %d", desired))
	out = Output{Status: st, Actions: []Action{{Route, desired}, {Kind: WriteStatus}}}
	if active > 0 && active != desired {
		out.Actions = append(out.Actions, Action{DeleteGeneration, active})
	}
	return out
}

// quiet reports whether writing st can wait: its only news is the UpToDate
// condition's message, and the rollout p is younger than in.QuietFor.
func quiet(in Input, st v1alpha1.MaterializeStatus, p v1alpha1.MaterializeRolloutStatus) bool {
	if in.QuietFor <= 0 || in.Now.Sub(p.StartedAt.Time) >= in.QuietFor {
		return false
	}
	was, now := in.Status.DeepCopy(), st.DeepCopy()
	for _, s := range []*v1alpha1.MaterializeStatus{was, now} {
		if c := upToDate(*s); c != nil {
			c.Message = ""
		}
	}
	return equality.Semantic.DeepEqual(was, now)
}

func validLeaderStatus(s string) bool {
	switch s {
	case Initializing, CatchingUp, ReadyToPromote, Promoting, IsLeader:
		return true
	}
	return false
}

// conditionsNeedUpdate is upstream's: no condition yet, or one written for
// an older spec.
func conditionsNeedUpdate(in Input) bool {
	if len(in.Status.Conditions) == 0 {
		return true
	}
	for _, c := range in.Status.Conditions {
		if c.ObservedGeneration != in.MetaGeneration {
			return true
		}
	}
	return false
}

func upToDate(st v1alpha1.MaterializeStatus) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, ConditionUpToDate)
}

// setCondition sets UpToDate; its lastTransitionTime changes only with its
// status (the Kubernetes convention, which upstream follows too).
// MaxMessageBytes bounds a condition's message (the API allows 32 KiB).
const MaxMessageBytes = 4096

func setCondition(st *v1alpha1.MaterializeStatus, in Input, status metav1.ConditionStatus, reason, message string) {
	// An API server's or environmentd's words are in it: bounded.
	c := metav1.Condition{Type: ConditionUpToDate, Status: status, Reason: reason, Message: boundedtext.Cut(message, MaxMessageBytes),
		ObservedGeneration: in.MetaGeneration, LastTransitionTime: metav1.NewTime(in.Now.Truncate(time.Second))}
	if old := upToDate(*st); old != nil {
		if old.Status == status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return
	}
	st.Conditions = append(st.Conditions, c)
}

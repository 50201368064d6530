package rollout

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	hashActive = HashScheme + "hash-of-the-active-spec"
	hashNew    = HashScheme + "hash-of-the-new-spec"
	imgActive  = "materialize/environmentd:v26.1.0"
	imgNew     = "materialize/environmentd:v26.2.0"
)

// steady is an environment whose generation 1 runs request r1; the spec is
// unchanged since its condition was written.
func steady() Input {
	return Input{
		Now: t0.Add(time.Hour), MetaGeneration: 3, Request: "r1", Image: imgActive,
		Timeout: 24 * time.Hour, Retry: 15 * time.Second, Hash: hashActive,
		Status: v1alpha1.MaterializeStatus{
			ResourceID: "abc", ObservedGeneration: 3, ActiveGeneration: 1,
			LastCompletedRolloutRequest: "r1", LastCompletedRolloutEnvironmentdImageRef: imgActive, ResourcesHash: hashActive,
			Conditions: []metav1.Condition{cond(metav1.ConditionTrue, ReasonApplied, t0, 3)},
		},
	}
}

func cond(status metav1.ConditionStatus, reason string, at time.Time, observed int64) metav1.Condition {
	return metav1.Condition{Type: ConditionUpToDate, Status: status, Reason: reason, Message: "m",
		ObservedGeneration: observed, LastTransitionTime: metav1.NewTime(at)}
}

// Modifiers of an Input.
type mod func(*Input)

// newRequest: the spec changed (image and hash) and a rollout, r2, is requested.
func newRequest(in *Input) {
	in.MetaGeneration, in.Request, in.Image, in.Hash = 4, "r2", imgNew, hashNew
}

// rolling: a rollout of r2 to generation 2 began at started, recorded as
// this operator records it.
func rolling(started time.Time, reason string) mod {
	return func(in *Input) {
		newRequest(in)
		in.Status.ResourcesHash = ""
		in.Status.Rollout = &v1alpha1.MaterializeRolloutStatus{Request: "r2", Generation: 2,
			EnvironmentdImageRef: imgNew, StartedAt: metav1.NewTime(started)}
		status := metav1.ConditionUnknown
		if reason == ReasonFailedDeploy {
			status = metav1.ConditionFalse
		}
		if reason == ReasonReadyToPromote {
			in.Status.ResourcesHash = hashNew
		}
		in.Status.Conditions = []metav1.Condition{cond(status, reason, started, 4)}
	}
}

// promotionSent: rolling, and the promotion was sent at sent.
func promotionSent(started, sent time.Time) mod {
	return func(in *Input) {
		rolling(started, ReasonPromoting)(in)
		in.Status.ResourcesHash = hashNew
		in.Status.Rollout.PromotionSentAt = &metav1.Time{Time: sent}
	}
}

// upstreamStatus: upstream orchestratord's status mid-rollout: no
// status.rollout, only its condition.
func upstreamStatus(reason string, since time.Time) mod {
	return func(in *Input) {
		newRequest(in)
		in.Status.ResourcesHash = ""
		in.Status.Conditions = []metav1.Condition{cond(metav1.ConditionUnknown, reason, since, 4)}
	}
}

func leader(status string) mod {
	return func(in *Input) { in.Desired = Observation{Ready: true, Leader: status} }
}

func at(d time.Duration) mod { return func(in *Input) { in.Now = t0.Add(d) } }

var (
	manual    mod = func(in *Input) { in.ManuallyPromote = true }
	forced    mod = func(in *Input) { in.Forced = true }
	immediate mod = func(in *Input) { in.DeleteActiveFirst, in.Forced = true, true }
)

// want is what a row expects; empty fields are not checked.
type want struct {
	actions       string // Actions joined by spaces
	status        metav1.ConditionStatus
	reason        string
	message       string // a substring of the condition's message
	poll          bool
	recheck       time.Duration
	active        uint64
	lastRequest   string
	lastImage     string
	hash          *string
	rollout       string // "none", or "request/generation/started(+promotion)"
	conditionKept bool   // the condition is the input's, untouched
}

func str(s string) *string { return &s }

// The table of docs/rollout.md, row by row.
func TestStep(t *testing.T) {
	cases := []struct {
		name string
		mods []mod
		want want
	}{
		// Settled.
		{"steady state writes nothing new", nil,
			want{actions: "WriteStatus DeleteGeneration(2) Route(1)", conditionKept: true, rollout: "none", lastRequest: "r1"}},
		{"spec changed without a request waits for approval", []mod{func(in *Input) { in.MetaGeneration, in.Hash = 4, hashNew }},
			want{actions: "WriteStatus DeleteGeneration(2) Route(1)", status: metav1.ConditionFalse, reason: ReasonWaitingForApproval,
				message: "Changes detected, waiting for approval for generation 2", rollout: "none"}},
		{"a request without changes completes at once", []mod{func(in *Input) { in.MetaGeneration, in.Request = 4, "r2" }},
			want{actions: "WriteStatus DeleteGeneration(2) Route(1)", status: metav1.ConditionTrue, reason: ReasonApplied,
				message: "No changes found from generation 1", lastRequest: "r2", rollout: "none"}},
		{"a RolloutTimeout stays until the spec changes", []mod{func(in *Input) {
			in.Hash = hashNew
			in.Status.Conditions = []metav1.Condition{cond(metav1.ConditionFalse, ReasonRolloutTimeout, t0, 3)}
		}}, want{actions: "WriteStatus DeleteGeneration(2) Route(1)", conditionKept: true}},
		{"a request withdrawn mid-rollout tears generation 2 down", []mod{rolling(t0, ReasonApplying), func(in *Input) { in.Request = "r1" }},
			want{actions: "WriteStatus DeleteGeneration(2) Route(1)", status: metav1.ConditionFalse, reason: ReasonWaitingForApproval,
				rollout: "none", lastRequest: "r1"}},
		{"a request withdrawn mid-rollout with the spec reverted is Applied", []mod{rolling(t0, ReasonReadyToPromote), func(in *Input) {
			in.Request, in.Hash, in.Status.ResourcesHash = "r1", hashActive, hashActive
		}}, want{actions: "WriteStatus DeleteGeneration(2) Route(1)", status: metav1.ConditionTrue, reason: ReasonApplied, rollout: "none"}},
		{"a stale status.rollout (already completed) is ignored", []mod{func(in *Input) {
			in.Status.Rollout = &v1alpha1.MaterializeRolloutStatus{Request: "r1", Generation: 1, StartedAt: metav1.NewTime(t0)}
		}}, want{actions: "WriteStatus DeleteGeneration(2) Route(1)", conditionKept: true, rollout: "none"}},

		{"leftover generations on either side of the active one go", []mod{func(in *Input) { in.Status.ActiveGeneration = 3 }},
			want{actions: "WriteStatus DeleteGeneration(4) DeleteGeneration(2) Route(3)", conditionKept: true}},

		// Starting and applying.
		{"first rollout of a new environment", []mod{func(in *Input) {
			in.Status = v1alpha1.MaterializeStatus{ResourceID: "abc", LastCompletedRolloutEnvironmentdImageRef: imgActive}
		}}, want{actions: "WriteStatus ApplyGeneration(1)", status: metav1.ConditionUnknown, reason: ReasonApplying,
			message: "Applying changes for generation 1: waiting for its pod to be ready", poll: true, rollout: "r1/1/1h0m0s", hash: str("")}},
		{"requested: the rollout is recorded before anything is touched", []mod{newRequest},
			want{actions: "WriteStatus ApplyGeneration(2)", status: metav1.ConditionUnknown, reason: ReasonApplying, poll: true,
				rollout: "r2/2/1h0m0s", hash: str(""), lastRequest: "r1", active: 1}},
		{"requested, with a generation 2 left running: recorded, then observed afresh", []mod{newRequest, leader(ReadyToPromote)},
			want{actions: "WriteStatus", status: metav1.ConditionUnknown, reason: ReasonApplying, poll: true,
				message: "Applying changes for generation 2", rollout: "r2/2/1h0m0s", hash: str("")}},
		{"requested, ImmediatelyPromoteCausingDowntime: recorded before the active generation goes", []mod{newRequest, immediate},
			want{actions: "WriteStatus DeleteGeneration(1) ApplyGeneration(2)", reason: ReasonApplying, poll: true, rollout: "r2/2/1h0m0s"}},
		{"requested, and the API server refuses the generation: the rollout is recorded, failed", []mod{newRequest,
			func(in *Input) { in.ApplyFailed = "StatefulSet is invalid" }},
			want{actions: "WriteStatus", status: metav1.ConditionFalse, reason: ReasonFailedDeploy, message: "StatefulSet is invalid",
				recheck: 15 * time.Second, rollout: "r2/2/1h0m0s"}},
		{"recorded: generation 2 is applied", []mod{rolling(t0.Add(time.Hour), ReasonApplying)},
			want{actions: "ApplyGeneration(2) WriteStatus", status: metav1.ConditionUnknown, reason: ReasonApplying, poll: true,
				message: "waiting for its pod to be ready", rollout: "r2/2/1h0m0s", hash: str("")}},
		{"the clock runs from the start", []mod{rolling(t0, ReasonApplying), at(3 * time.Hour)},
			want{actions: "ApplyGeneration(2) WriteStatus", reason: ReasonApplying, poll: true, rollout: "r2/2/0s"}},
		{"environmentd unreachable", []mod{rolling(t0, ReasonApplying), func(in *Input) {
			in.Desired = Observation{Ready: true, LeaderErr: "dial tcp: connection refused"}
		}}, want{actions: "ApplyGeneration(2) WriteStatus", status: metav1.ConditionUnknown, reason: ReasonApplying,
			message: "connection refused", poll: true}},
		{"environmentd answers garbage", []mod{rolling(t0, ReasonApplying), leader("Sleeping")},
			want{actions: "ApplyGeneration(2) WriteStatus", reason: ReasonApplying, message: `unknown leader status "Sleeping"`, poll: true}},
		{"environmentd initializing", []mod{rolling(t0, ReasonApplying), leader(Initializing)},
			want{actions: "ApplyGeneration(2) WriteStatus", reason: ReasonApplying, message: "environmentd is Initializing", poll: true}},
		{"its pod cannot start: the condition says why", []mod{rolling(t0, ReasonApplying), func(in *Input) {
			in.Desired = Observation{Waiting: "environmentd generation 2 Pending: 0/1 nodes are available"}
		}}, want{actions: "ApplyGeneration(2) WriteStatus", reason: ReasonApplying, poll: true,
			message: "Applying changes for generation 2: waiting for its pod to be ready: environmentd generation 2 Pending: 0/1 nodes are available"}},
		{"catching up: the condition says on what", []mod{rolling(t0, ReasonApplying), leader(Initializing), func(in *Input) {
			in.Desired.Waiting = "catching up: clusterd replica pods 1/2 ready"
		}}, want{actions: "ApplyGeneration(2) WriteStatus", reason: ReasonApplying, poll: true,
			message: "environmentd is Initializing (catching up: clusterd replica pods 1/2 ready)"}},
		{"environmentd catching up", []mod{rolling(t0, ReasonApplying), leader(CatchingUp)},
			want{actions: "ApplyGeneration(2) WriteStatus", reason: ReasonApplying, message: "environmentd is CatchingUp", poll: true}},
		{"ready: promotion recorded, then sent", []mod{rolling(t0, ReasonApplying), leader(ReadyToPromote)},
			want{actions: "ApplyGeneration(2) WriteStatus Promote(2)", status: metav1.ConditionUnknown, reason: ReasonPromoting,
				message: "Attempting to promote generation 2", poll: true, rollout: "r2/2/0s+1h0m0s", hash: str(hashNew)}},
		{"ManuallyPromote: ready to promote, checked again at the deadline", []mod{rolling(t0, ReasonApplying), leader(ReadyToPromote), manual, at(4 * time.Hour)},
			want{actions: "ApplyGeneration(2) WriteStatus", status: metav1.ConditionUnknown, reason: ReasonReadyToPromote,
				message: "Ready to promote generation 2", recheck: 20 * time.Hour, rollout: "r2/2/0s", hash: str(hashNew)}},
		{"ManuallyPromote with forcePromote promotes", []mod{rolling(t0, ReasonReadyToPromote), leader(ReadyToPromote), manual, forced},
			want{actions: "ApplyGeneration(2) WriteStatus Promote(2)", reason: ReasonPromoting, poll: true}},
		{"forced: catch-up skipped", []mod{rolling(t0, ReasonApplying), leader(CatchingUp), forced},
			want{actions: "ApplyGeneration(2) SkipCatchup(2) WriteStatus", reason: ReasonApplying, message: "skipping catch-up", poll: true}},
		{"forced and initializing: catch-up skipped", []mod{rolling(t0, ReasonApplying), leader(Initializing), forced},
			want{actions: "ApplyGeneration(2) SkipCatchup(2) WriteStatus", reason: ReasonApplying, poll: true}},
		{"ImmediatelyPromoteCausingDowntime deletes the active generation first", []mod{rolling(t0, ReasonApplying), immediate},
			want{actions: "DeleteGeneration(1) ApplyGeneration(2) WriteStatus", reason: ReasonApplying, poll: true}},

		// Timeout.
		{"timed out while applying: cancelled", []mod{rolling(t0, ReasonApplying), at(24 * time.Hour)},
			want{actions: "WriteStatus DeleteGeneration(2)", status: metav1.ConditionFalse, reason: ReasonRolloutTimeout,
				message: "Cancelled rollout to generation 2 after it exceeded the rollout timeout of 1day",
				rollout: "none", lastRequest: "r2", active: 1, lastImage: imgActive}},
		{"timed out while ready to promote: cancelled", []mod{rolling(t0, ReasonReadyToPromote), leader(ReadyToPromote), manual, at(25 * time.Hour)},
			want{actions: "WriteStatus DeleteGeneration(2)", reason: ReasonRolloutTimeout}},
		{"timed out in FailedDeploy: cancelled", []mod{rolling(t0, ReasonFailedDeploy), at(25 * time.Hour), func(in *Input) { in.Blocked = "backend Secret gone" }},
			want{actions: "WriteStatus DeleteGeneration(2)", reason: ReasonRolloutTimeout}},
		{"forced rollouts never time out", []mod{rolling(t0, ReasonApplying), at(48 * time.Hour), forced},
			want{actions: "ApplyGeneration(2) WriteStatus", reason: ReasonApplying, poll: true}},
		{"a new request restarts the clock", []mod{rolling(t0, ReasonApplying), at(25 * time.Hour), func(in *Input) { in.Request = "r3" }},
			want{actions: "WriteStatus ApplyGeneration(2)", reason: ReasonApplying, poll: true, rollout: "r3/2/25h0m0s"}},

		// Cannot go on.
		{"blocked before anything is created", []mod{newRequest, func(in *Input) { in.Blocked = `backend Secret "mz" has no "license_key" entry` }},
			want{actions: "WriteStatus", status: metav1.ConditionFalse, reason: ReasonFailedDeploy, message: "license_key",
				recheck: 15 * time.Second, rollout: "none", hash: str(hashActive)}},
		{"blocked mid-rollout: checked again by the deadline", []mod{rolling(t0, ReasonApplying), at(24*time.Hour - 5*time.Second),
			func(in *Input) { in.Blocked = "no password" }},
			want{actions: "WriteStatus", reason: ReasonFailedDeploy, recheck: 5 * time.Second, rollout: "r2/2/0s"}},
		{"the API server refuses the generation", []mod{rolling(t0, ReasonApplying), func(in *Input) { in.ApplyFailed = "StatefulSet is invalid" }},
			want{actions: "WriteStatus", status: metav1.ConditionFalse, reason: ReasonFailedDeploy,
				message: "Failed to apply changes for generation 2: StatefulSet is invalid", recheck: 15 * time.Second, rollout: "r2/2/0s"}},

		{"environmentd leads though no promotion was recorded: completed", []mod{rolling(t0, ReasonApplying), leader(IsLeader), manual},
			want{actions: "Route(2) WriteStatus DeleteGeneration(1)", reason: ReasonApplied, active: 2, lastRequest: "r2"}},
		{"environmentd promoting past the timeout: not cancelled", []mod{rolling(t0, ReasonApplying), leader(Promoting), at(25 * time.Hour)},
			want{actions: "WriteStatus", reason: ReasonPromoting, poll: true, rollout: "r2/2/0s+25h0m0s"}},

		// Promoting: past the point of no return.
		{"promoted: routed, old generation retired, recorded", []mod{promotionSent(t0, t0), leader(IsLeader)},
			want{actions: "Route(2) WriteStatus DeleteGeneration(1)", status: metav1.ConditionTrue, reason: ReasonApplied,
				message: "Successfully applied changes for generation 2", active: 2, lastRequest: "r2", lastImage: imgNew,
				hash: str(hashNew), rollout: "none"}},
		{"first generation promoted: nothing to retire", []mod{promotionSent(t0, t0), leader(IsLeader), func(in *Input) {
			in.Status.ActiveGeneration = 0
			in.Status.Rollout.Generation = 1
		}}, want{actions: "Route(1) WriteStatus", active: 1}},
		{"promoting past the timeout is never cancelled", []mod{promotionSent(t0, t0.Add(23*time.Hour)), leader(Promoting), at(30 * time.Hour)},
			want{actions: "WriteStatus", status: metav1.ConditionUnknown, reason: ReasonPromoting, poll: true, rollout: "r2/2/0s+23h0m0s"}},
		{"promoting with the request withdrawn still promotes", []mod{promotionSent(t0, t0), leader(Promoting), func(in *Input) { in.Request = "r1" }},
			want{actions: "WriteStatus", reason: ReasonPromoting, poll: true}},
		{"promotion lost: sent again", []mod{promotionSent(t0, t0), leader(ReadyToPromote)},
			want{actions: "Promote(2) WriteStatus", reason: ReasonPromoting, message: "promotion sent again", poll: true}},
		{"promoting, environmentd unreachable", []mod{promotionSent(t0, t0), func(in *Input) { in.Desired = Observation{Ready: true, LeaderErr: "timeout"} }},
			want{actions: "WriteStatus", reason: ReasonPromoting, message: "timeout", poll: true}},
		{"promoting, pod not ready", []mod{promotionSent(t0, t0)},
			want{actions: "WriteStatus", reason: ReasonPromoting, poll: true}},
		{"promoting, forced, catching up again", []mod{promotionSent(t0, t0), leader(CatchingUp), forced},
			want{actions: "SkipCatchup(2) WriteStatus", reason: ReasonPromoting, poll: true}},
		{"promoting, garbage", []mod{promotionSent(t0, t0), leader("")},
			want{actions: "WriteStatus", reason: ReasonPromoting, message: "unknown leader status", poll: true}},
		{"promoted after the spec moved on: what was promoted is recorded", []mod{promotionSent(t0, t0), leader(IsLeader), func(in *Input) {
			in.Request, in.Image, in.Hash = "r3", "materialize/environmentd:v26.3.0", "hash-3"
		}}, want{actions: "Route(2) WriteStatus DeleteGeneration(1)", lastRequest: "r2", lastImage: imgNew, hash: str(hashNew)}},

		// A status written by upstream orchestratord, mid-rollout.
		{"upstream Promoting: only promotes, never times out", []mod{upstreamStatus(ReasonPromoting, t0), leader(Promoting), at(48 * time.Hour)},
			want{actions: "WriteStatus", reason: ReasonPromoting, poll: true, rollout: "r2/2/0s+0s"}},
		{"upstream Applying past its timeout: cancelled", []mod{upstreamStatus(ReasonApplying, t0), at(25 * time.Hour)},
			want{actions: "WriteStatus DeleteGeneration(2)", reason: ReasonRolloutTimeout}},
		{"upstream ReadyToPromote keeps its clock", []mod{upstreamStatus(ReasonReadyToPromote, t0), leader(ReadyToPromote), manual, at(2 * time.Hour)},
			want{actions: "ApplyGeneration(2) WriteStatus", reason: ReasonReadyToPromote, rollout: "r2/2/0s", recheck: 22 * time.Hour}},
		{"upstream Promoting, promoted", []mod{upstreamStatus(ReasonPromoting, t0), leader(IsLeader)},
			want{actions: "Route(2) WriteStatus DeleteGeneration(1)", reason: ReasonApplied, active: 2, lastRequest: "r2",
				lastImage: imgNew, hash: str(hashNew)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := steady()
			for _, m := range c.mods {
				m(&in)
			}
			before := fmt.Sprintf("%+v", in.Status)
			out := Step(in)
			if after := fmt.Sprintf("%+v", in.Status); after != before {
				t.Fatal("Step modified its input's status")
			}
			check(t, in, out, c.want)
		})
	}
}

func check(t *testing.T, in Input, out Output, w want) {
	t.Helper()
	var actions []string
	for _, a := range out.Actions {
		actions = append(actions, a.String())
	}
	if got := strings.Join(actions, " "); got != w.actions {
		t.Errorf("actions = %q, want %q", got, w.actions)
	}
	c := upToDate(out.Status)
	if c == nil {
		t.Fatal("no UpToDate condition")
	}
	if w.conditionKept && !reflect.DeepEqual(*c, *upToDate(in.Status)) {
		t.Errorf("condition = %+v, want it kept: %+v", *c, *upToDate(in.Status))
	}
	if w.status != "" && c.Status != w.status {
		t.Errorf("condition status = %s, want %s", c.Status, w.status)
	}
	if w.reason != "" && c.Reason != w.reason {
		t.Errorf("condition reason = %s (%s), want %s", c.Reason, c.Message, w.reason)
	}
	if !strings.Contains(c.Message, w.message) {
		t.Errorf("condition message = %q, want it to contain %q", c.Message, w.message)
	}
	if !w.conditionKept && c.ObservedGeneration != in.MetaGeneration {
		t.Errorf("condition observedGeneration = %d, want %d", c.ObservedGeneration, in.MetaGeneration)
	}
	if out.Poll != w.poll {
		t.Errorf("poll = %v, want %v", out.Poll, w.poll)
	}
	if out.RecheckAfter != w.recheck {
		t.Errorf("recheck after %v, want %v", out.RecheckAfter, w.recheck)
	}
	if w.active != 0 && out.Status.ActiveGeneration != w.active {
		t.Errorf("activeGeneration = %d, want %d", out.Status.ActiveGeneration, w.active)
	}
	if w.lastRequest != "" && out.Status.LastCompletedRolloutRequest != w.lastRequest {
		t.Errorf("lastCompletedRolloutRequest = %s, want %s", out.Status.LastCompletedRolloutRequest, w.lastRequest)
	}
	if w.lastImage != "" && out.Status.LastCompletedRolloutEnvironmentdImageRef != w.lastImage {
		t.Errorf("lastCompletedRolloutEnvironmentdImageRef = %s, want %s", out.Status.LastCompletedRolloutEnvironmentdImageRef, w.lastImage)
	}
	if w.hash != nil && out.Status.ResourcesHash != *w.hash {
		t.Errorf("resourcesHash = %q, want %q", out.Status.ResourcesHash, *w.hash)
	}
	if w.rollout != "" {
		if got := describe(out.Status.Rollout); got != w.rollout {
			t.Errorf("status.rollout = %s, want %s", got, w.rollout)
		}
	}
}

// describe is request/generation/start(+promotion sent), times from t0.
func describe(r *v1alpha1.MaterializeRolloutStatus) string {
	if r == nil {
		return "none"
	}
	s := fmt.Sprintf("%s/%d/%s", r.Request, r.Generation, r.StartedAt.Sub(t0))
	if r.PromotionSentAt != nil {
		s += "+" + r.PromotionSentAt.Sub(t0).String()
	}
	return s
}

// A whole rollout, each step fed the status the previous one wrote: it
// ends where it started, settled, and the next step writes nothing.
func TestStepSequence(t *testing.T) {
	in := steady()
	newRequest(&in)
	steps := []struct {
		after  time.Duration
		obs    Observation
		reason string
	}{
		{time.Hour, Observation{}, ReasonApplying},
		{time.Hour + 2*time.Second, Observation{Ready: true, Leader: Initializing}, ReasonApplying},
		{time.Hour + 4*time.Second, Observation{Ready: true, Leader: CatchingUp}, ReasonApplying},
		{time.Hour + 6*time.Second, Observation{Ready: true, Leader: ReadyToPromote}, ReasonPromoting},
		{time.Hour + 8*time.Second, Observation{Ready: true, Leader: Promoting}, ReasonPromoting},
		{time.Hour + 10*time.Second, Observation{Ready: true, Leader: IsLeader}, ReasonApplied},
		{time.Hour + 12*time.Second, Observation{}, ReasonApplied},
	}
	var out Output
	for i, s := range steps {
		in.Now, in.Desired = t0.Add(s.after), s.obs
		out = Step(in)
		if c := upToDate(out.Status); c.Reason != s.reason {
			t.Fatalf("step %d: reason %s (%s), want %s", i, c.Reason, c.Message, s.reason)
		}
		if i == len(steps)-1 && !reflect.DeepEqual(out.Status, in.Status) {
			t.Errorf("settled step changed the status:\n got %+v\nwant %+v", out.Status, in.Status)
		}
		in.Status = out.Status
	}
	if c := upToDate(in.Status); !c.LastTransitionTime.Equal(&metav1.Time{Time: t0.Add(time.Hour + 10*time.Second)}) {
		t.Errorf("Applied lastTransitionTime = %v, want when it became True", c.LastTransitionTime)
	}
	if in.Status.ActiveGeneration != 2 || in.Status.LastCompletedRolloutRequest != "r2" || in.Status.Rollout != nil {
		t.Errorf("final status %+v", in.Status)
	}
}

// A rollout younger than QuietFor writes its status at its transitions
// only, as upstream does; older, environmentd's progress is written too.
func TestProgressAloneWaitsForQuietFor(t *testing.T) {
	in := steady()
	newRequest(&in)
	in.QuietFor = 20 * time.Second
	steps := []struct {
		after time.Duration
		obs   Observation
		write bool
	}{
		{0, Observation{}, true}, // Applying: the rollout is recorded
		{2 * time.Second, Observation{Ready: true, Leader: Initializing}, false},
		{4 * time.Second, Observation{Ready: true, Leader: CatchingUp}, false},
		{6 * time.Second, Observation{Ready: true, Leader: ReadyToPromote}, true}, // Promoting, before the call
		{8 * time.Second, Observation{Ready: true, Leader: Promoting}, false},
		{10 * time.Second, Observation{Ready: true, Leader: IsLeader}, true}, // Applied
	}
	writes := 0
	for i, s := range steps {
		in.Now, in.Desired = t0.Add(time.Hour+s.after), s.obs
		out := Step(in)
		wrote := slices.ContainsFunc(out.Actions, func(a Action) bool { return a.Kind == WriteStatus })
		if wrote != s.write {
			t.Fatalf("step %d (%+v): wrote %v, want %v: %s", i, s.obs, wrote, s.write, upToDate(out.Status).Message)
		}
		if wrote {
			writes++
			in.Status = out.Status // what the API server now stores
		}
	}
	if writes != 3 || in.Status.ActiveGeneration != 2 || upToDate(in.Status).Reason != ReasonApplied {
		t.Fatalf("%d writes, final status %+v", writes, in.Status)
	}

	// Past QuietFor, progress is news: a rollout that takes long says so.
	slow := steady()
	newRequest(&slow)
	slow.QuietFor = 20 * time.Second
	slow.Now = t0.Add(time.Hour)
	slow.Status = Step(slow).Status
	for _, c := range []struct {
		after time.Duration
		write bool
	}{{19 * time.Second, false}, {20 * time.Second, true}} {
		slow.Now, slow.Desired = t0.Add(time.Hour+c.after), Observation{Ready: true, Leader: CatchingUp}
		out := Step(slow)
		if wrote := slices.ContainsFunc(out.Actions, func(a Action) bool { return a.Kind == WriteStatus }); wrote != c.write {
			t.Errorf("CatchingUp %v into the rollout: wrote %v, want %v", c.after, wrote, c.write)
		}
	}

	// Another concern's condition (LicenseKey) changed: written at once.
	licensed := slow
	licensed.Now = t0.Add(time.Hour + 5*time.Second)
	licensed.Also = []metav1.Condition{{Type: "LicenseKey", Status: metav1.ConditionFalse, Reason: "LicenseKeyExpired", Message: "m"}}
	if out := Step(licensed); !slices.ContainsFunc(out.Actions, func(a Action) bool { return a.Kind == WriteStatus }) {
		t.Error("a LicenseKey condition changed during a young rollout was not written")
	}

	// Anything but the message is written at once: a spec changed meanwhile.
	changed := slow
	changed.Now = t0.Add(time.Hour + 5*time.Second)
	changed.MetaGeneration++
	if out := Step(changed); !slices.ContainsFunc(out.Actions, func(a Action) bool { return a.Kind == WriteStatus }) {
		t.Error("a new metadata.generation during a young rollout was not written")
	}
}

func TestPending(t *testing.T) {
	for _, c := range []struct {
		name    string
		mods    []mod
		gen     uint64
		pending bool
	}{
		{"steady", nil, 2, false},
		{"requested", []mod{newRequest}, 2, true},
		{"changes without a request", []mod{func(in *Input) { in.Hash = hashNew }}, 2, false},
		{"promoting with the request withdrawn", []mod{promotionSent(t0, t0), func(in *Input) { in.Request = "r1" }}, 2, true},
	} {
		in := steady()
		for _, m := range c.mods {
			m(&in)
		}
		if gen, pending := Pending(in); gen != c.gen || pending != c.pending {
			t.Errorf("%s: Pending = %d, %v; want %d, %v", c.name, gen, pending, c.gen, c.pending)
		}
	}
}

// After a switch from upstream orchestratord the status holds upstream's
// resourcesHash, which this operator cannot compute. Where upstream's own
// condition says this very spec was applied, the hash is adopted: no
// WaitingForApproval, and no needless rollout on the next request.
func TestAForeignHashIsAdoptedWhereUpstreamSaysApplied(t *testing.T) {
	in := steady()
	in.Status.ResourcesHash = "5f0c2d0a9e8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d" // upstream's
	out := Step(in)
	if out.Status.ResourcesHash != hashActive {
		t.Errorf("resourcesHash = %q, want this operator's %q", out.Status.ResourcesHash, hashActive)
	}
	if c := upToDate(out.Status); c == nil || c.Reason != ReasonApplied {
		t.Errorf("condition %+v, want Applied", c)
	}

	// A request for a spec whose objects do not change (balancerdReplicas,
	// say) then rolls nothing out.
	in.Status = out.Status
	in.MetaGeneration, in.Request = 4, "r2"
	if out := Step(in); hasAction(out, ApplyGeneration) {
		t.Errorf("an adopted hash must not read as a change: %+v", out.Actions)
	}
}

func TestAForeignHashIsNotAdoptedWithoutProof(t *testing.T) {
	foreign := "5f0c2d0a9e8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d"
	cases := map[string]mod{
		// Upstream saw changes in this spec: they are still pending.
		"waiting for approval": func(in *Input) {
			in.Status.Conditions = []metav1.Condition{cond(metav1.ConditionFalse, ReasonWaitingForApproval, t0, 3)}
		},
		// The spec changed since upstream wrote Applied.
		"an older spec applied": func(in *Input) { in.MetaGeneration = 4 },
		// A hash of this operator's own scheme is compared, never adopted.
		"own scheme": func(in *Input) { in.Status.ResourcesHash = HashScheme + "other" },
	}
	for name, m := range cases {
		in := steady()
		in.Status.ResourcesHash = foreign
		m(&in)
		want := in.Status.ResourcesHash
		out := Step(in)
		if out.Status.ResourcesHash != want {
			t.Errorf("%s: resourcesHash = %q, want %q kept", name, out.Status.ResourcesHash, want)
		}
	}
}

func hasAction(out Output, kind ActionKind) bool {
	for _, a := range out.Actions {
		if a.Kind == kind {
			return true
		}
	}
	return false
}

// A new Materialize's first status (Step on the initial status) always
// holds a condition: an empty list is left out of the write, and upstream's
// typed reader needs status.conditions.
func TestFirstStatusAlwaysHasACondition(t *testing.T) {
	for name, tweak := range map[string]func(*Input){
		"starting":                            func(*Input) {},
		"blocked by the pre-flight check":     func(in *Input) { in.Blocked = "no backend Secret" },
		"refused by the API server":           func(in *Input) { in.ApplyFailed = "refused" },
		"no rollout requested":                func(in *Input) { in.Request = "" },
		"a generation left ready":             func(in *Input) { in.Desired = Observation{Ready: true, Leader: Initializing} },
		"a generation leading at once":        func(in *Input) { in.Desired = Observation{Ready: true, Leader: IsLeader} },
		"resumed after an earlier generation": func(in *Input) { in.Status.ActiveGeneration = 4 },
	} {
		in := Input{Now: t0, MetaGeneration: 1, Request: "11111111-2222-4333-8444-555555555555", Hash: HashScheme + "h",
			Timeout: time.Hour, Retry: time.Second, Status: v1alpha1.MaterializeStatus{ResourceID: "id", ObservedGeneration: 1}}
		tweak(&in)
		if out := Step(in); len(out.Status.Conditions) == 0 {
			t.Errorf("%s: the first status has no condition: %+v", name, out.Status)
		}
	}
}

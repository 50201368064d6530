package environmentd

import (
	"net/http"
	"sync"

	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
)

// phase is a state of environmentd's deployment (upstream
// src/environmentd/src/deployment/state.rs, DeploymentStateInner).
type phase int

const (
	phaseInitializing phase = iota
	// phaseCatchingUp is reported as Initializing: real environmentd never
	// answers "CatchingUp".
	phaseCatchingUp
	phaseReadyToPromote
	phasePromoting
	phaseIsLeader
)

func (p phase) status() mzenv.LeaderStatus {
	switch p {
	case phaseReadyToPromote:
		return mzenv.ReadyToPromote
	case phasePromoting:
		return mzenv.Promoting
	case phaseIsLeader:
		return mzenv.IsLeader
	default:
		return mzenv.Initializing
	}
}

// phaseOf is the phase a test sets with a status; CatchingUp names the
// catch-up phase (reported as Initializing), any unknown status Initializing.
func phaseOf(s mzenv.LeaderStatus) phase {
	switch s {
	case mzenv.CatchingUp:
		return phaseCatchingUp
	case mzenv.ReadyToPromote:
		return phaseReadyToPromote
	case mzenv.Promoting:
		return phasePromoting
	case mzenv.IsLeader:
		return phaseIsLeader
	default:
		return phaseInitializing
	}
}

// Deployment is one environmentd process's deployment state, with
// upstream's transitions and the answers of its leader API
// (src/environmentd/src/http.rs): the process drives it forward
// (SetCatchingUp, SetReadyToPromote, SetIsLeader), the operator through
// skip-catchup and promote.
type Deployment struct {
	mu       sync.Mutex
	phase    phase
	skip     chan struct{} // closed when catch-up is skipped
	promoted chan struct{} // closed when promoted
	adapter  chan struct{} // closed once the adapter serves
}

// NewDeployment returns a deployment in the Initializing phase, its adapter
// not up.
func NewDeployment() *Deployment { return &Deployment{adapter: make(chan struct{})} }

// SetAdapterReady is the adapter up: logins (which check the password
// through it) are answered from now on.
func (d *Deployment) SetAdapterReady() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.adapter == nil {
		d.adapter = make(chan struct{})
	}
	select {
	case <-d.adapter:
	default:
		close(d.adapter)
	}
}

// AdapterReady is closed once the adapter serves. A Deployment made
// without NewDeployment has its adapter up.
func (d *Deployment) AdapterReady() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.adapter == nil {
		d.adapter = make(chan struct{})
		close(d.adapter)
	}
	return d.adapter
}

// Status is what GET /api/leader/status answers.
func (d *Deployment) Status() mzenv.LeaderStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.phase.status()
}

// SetCatchingUp enters the catch-up phase of a new generation; the channel
// closes when the operator skips it.
func (d *Deployment) SetCatchingUp() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.phase = phaseCatchingUp
	d.skip = make(chan struct{})
	return d.skip
}

// SetReadyToPromote announces the generation ready; the channel closes
// when the operator promotes it.
func (d *Deployment) SetReadyToPromote() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.phase = phaseReadyToPromote
	d.promoted = make(chan struct{})
	return d.promoted
}

// SetIsLeader is a process that opened the catalog for writing: a fresh
// catalog, or its own generation's after the restart that follows promotion.
func (d *Deployment) SetIsLeader() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.phase = phaseIsLeader
}

// set puts the deployment in p as a test lever, closing nothing.
func (d *Deployment) set(p phase) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.phase = p
	if p == phaseCatchingUp && d.skip == nil {
		d.skip = make(chan struct{})
	}
	if p == phaseReadyToPromote && d.promoted == nil {
		d.promoted = make(chan struct{})
	}
}

// trySkipCatchup is upstream's try_skip_catchup: refused only while
// Initializing; in catch-up it ends catch-up; later it is a no-op.
func (d *Deployment) trySkipCatchup() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch d.phase {
	case phaseInitializing:
		return false
	case phaseCatchingUp:
		if d.skip != nil {
			close(d.skip)
			d.skip = nil
		}
	}
	return true
}

// tryPromote is upstream's try_promote: refused while Initializing or
// catching up, a no-op once Promoting or IsLeader.
func (d *Deployment) tryPromote() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch d.phase {
	case phaseInitializing, phaseCatchingUp:
		return false
	case phaseReadyToPromote:
		d.phase = phasePromoting
		if d.promoted != nil {
			close(d.promoted)
			d.promoted = nil
		}
	}
	return true
}

// Upstream's answers (src/environmentd/src/http.rs).
func answerStatus(w http.ResponseWriter, s mzenv.LeaderStatus) {
	writeJSON(w, http.StatusOK, map[string]string{"status": string(s)})
}

func answerPromote(w http.ResponseWriter, ok bool) {
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"result": map[string]any{"Failure": map[string]string{"message": "cannot promote leader while initializing"}}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "Success"})
}

func answerSkipCatchup(w http.ResponseWriter, ok bool) {
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]string{
			"message": "cannot skip catchup in this phase of initialization; try again later"})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ServeHTTP serves the leader API of this one process: status (GET),
// promote and skip-catchup (POST), with upstream's answers.
func (d *Deployment) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case path == mzenv.StatusPath && r.Method == http.MethodGet:
		answerStatus(w, d.Status())
	case path == mzenv.PromotePath && r.Method == http.MethodPost:
		answerPromote(w, d.tryPromote())
	case path == mzenv.SkipCatchupPath && r.Method == http.MethodPost:
		answerSkipCatchup(w, d.trySkipCatchup())
	case path == mzenv.StatusPath:
		methodNotAllowed(w, http.MethodGet)
	case path == mzenv.PromotePath, path == mzenv.SkipCatchupPath:
		methodNotAllowed(w, http.MethodPost)
	default:
		http.NotFound(w, r)
	}
}

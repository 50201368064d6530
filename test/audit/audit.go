// Package audit reads kube-apiserver audit logs (audit.k8s.io/v1 Events,
// one JSON object per line) for the tests that prove a fenced leader wrote
// nothing: the control-plane tests and the end-to-end chaos suite.
package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// Event is the part of an audit.k8s.io/v1 Event the tests look at.
type Event struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// By tells whether the request was sent by agent: its user agent is agent,
// or agent followed by a space and more (a controller's writes carry
// "controller/<name>" after the process's agent, so one agent names the
// process and a longer one a single Lease's writes).
func (e Event) By(agent string) bool {
	return e.UserAgent == agent || strings.HasPrefix(e.UserAgent, agent+" ")
}

// IsWrite tells whether the request could change state.
func (e Event) IsWrite() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Succeeded tells whether the API server carried the request out: a
// refused one (a Conflict, say) wrote nothing.
func (e Event) Succeeded() bool {
	return e.ResponseStatus == nil || e.ResponseStatus.Code < 300
}

// Read returns the events of the audit log at path. When containing is not
// empty only lines containing it are decoded: the end-to-end cluster's log
// holds every request of every test.
func Read(path, containing string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var events []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var bad error
	for sc.Scan() {
		if containing != "" && !bytes.Contains(sc.Bytes(), []byte(containing)) {
			continue
		}
		if bad != nil {
			return nil, bad // not the last line: the log is corrupt
		}
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			// The API server may be writing the last line as it is read.
			bad = fmt.Errorf("audit log line: %w", err)
			continue
		}
		events = append(events, ev)
	}
	return events, sc.Err()
}

// Begins returns when the audit log at path begins: its first event.
func Begins(path string) (time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	if !sc.Scan() {
		return time.Time{}, sc.Err()
	}
	var ev Event
	if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
		return time.Time{}, fmt.Errorf("audit log's first line: %w", err)
	}
	return ev.RequestReceivedTimestamp, nil
}

// Window is a span during which an identity must not write: from the
// expiry of the last Lease it held (another replica may lead from then on)
// to its next acquisition.
type Window struct{ From, To time.Time }

// LateWrites returns the writes the API server carried out for a request
// sent by userAgent (By) and received inside one of windows. Lease writes are
// left out: they are the election itself (presence, acquisition attempts,
// a release), each guarded by the Lease's resourceVersion.
func LateWrites(events []Event, userAgent string, windows []Window) []Event {
	var late []Event
	for _, ev := range events {
		if !ev.By(userAgent) || !ev.IsWrite() || !ev.Succeeded() || (ev.ObjectRef != nil && ev.ObjectRef.Resource == "leases") {
			continue
		}
		for _, w := range windows {
			if !ev.RequestReceivedTimestamp.Before(w.From) && ev.RequestReceivedTimestamp.Before(w.To) {
				late = append(late, ev)
				break
			}
		}
	}
	return late
}

// String is one line for a test's failure message.
func (e Event) String() string {
	return fmt.Sprintf("%s %s %d at %s", e.Verb, e.RequestURI, e.code(), e.RequestReceivedTimestamp.Format(time.RFC3339Nano))
}

func (e Event) code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

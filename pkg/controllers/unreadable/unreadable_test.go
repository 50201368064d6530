package unreadable

import (
	"io"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned/scheme"
)

func materializeReader() reader[*v1alpha1.Materialize] {
	return reader[*v1alpha1.Materialize]{decoder: scheme.Codecs.UniversalDeserializer(),
		newObject: func() *v1alpha1.Materialize { return &v1alpha1.Materialize{} }}
}

// materialize is a v1alpha1 Materialize as the API server sends it, with
// the given cpu request (JSON), more spec members and status (JSON, "" for
// none).
func materialize(annotations, cpu, spec, status string) string {
	s := `{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize","metadata":{"name":"mz","namespace":"tenant","resourceVersion":"7"` +
		annotations + `},"spec":{"environmentdImageRef":"materialize/environmentd:v26.1.0","backendSecretName":"backend",` +
		`"environmentdResourceRequirements":{"requests":{"cpu":` + cpu + `}}` + spec + `}`
	if status != "" {
		s += `,"status":` + status
	}
	return s + "}"
}

// The API server stores quantities its schema's pattern admits and Go's
// resource.ParseQuantity refuses ("1e1.5", an exponent past int64): such an
// object is cached as a placeholder, marked with why, keeping its metadata,
// the spec's strings that read on their own (environmentId among them) and,
// when that reads, its status.
func TestAnObjectThatDoesNotReadBecomesAPlaceholder(t *testing.T) {
	r := materializeReader()
	const scratch = `,"environmentId":"0b0b0b0b-1111-4222-8333-444444444444","environmentdScratchVolumeStorageRequirement":"1e1.5"`
	for name, tc := range map[string]struct {
		raw        string
		resourceID string
	}{
		"decimal exponent":            {raw: materialize("", `"1e1.5"`, "", `{"resourceId":"abcdefghij"}`), resourceID: "abcdefghij"},
		"exponent past int64":         {raw: materialize("", `"1e99999999999999999999"`, "", ""), resourceID: ""},
		"status does not read":        {raw: materialize("", `"1e1.5"`, "", `{"resourceId":"abcdefghij","rollout":{"startedAt":"yesterday"}}`), resourceID: ""},
		"forged marker, bad spec":     {raw: materialize(`,"annotations":{"`+Annotation+`":"forged"}`, `"1e1.5"`, "", ""), resourceID: ""},
		"a string that does not read": {raw: materialize("", `"1"`, scratch, `{"resourceId":"abcdefghij"}`), resourceID: "abcdefghij"},
	} {
		t.Run(name, func(t *testing.T) {
			obj, ok := r.decode([]byte(tc.raw))
			if !ok {
				t.Fatal("no placeholder")
			}
			why, marked := Reason(obj)
			if !marked || !strings.Contains(why, "quantit") {
				t.Fatalf("reason %q (marked %v), want the decoder's error", why, marked)
			}
			if obj.Name != "mz" || obj.Namespace != "tenant" || obj.ResourceVersion != "7" {
				t.Errorf("metadata %+v", obj.ObjectMeta)
			}
			if obj.Spec.EnvironmentdImageRef != "materialize/environmentd:v26.1.0" || obj.Spec.BackendSecretName != "backend" {
				t.Errorf("spec %+v, want its strings", obj.Spec)
			}
			if obj.Spec.EnvironmentdResourceRequirements != nil || obj.Spec.EnvironmentdScratchVolumeStorageRequirement != nil {
				t.Errorf("spec %+v, want none of what did not read", obj.Spec)
			}
			if strings.Contains(tc.raw, "environmentId") && obj.Spec.EnvironmentID != "0b0b0b0b-1111-4222-8333-444444444444" {
				t.Errorf("spec.environmentId %q: the placeholder no longer holds its environment's id", obj.Spec.EnvironmentID)
			}
			if obj.Status.ResourceID != tc.resourceID {
				t.Errorf("status.resourceId %q, want %q", obj.Status.ResourceID, tc.resourceID)
			}
		})
	}
}

// An object that reads is cached whole, and never marked: a marker its
// owner wrote is dropped, as it would otherwise stop its reconciles.
func TestAnObjectThatReadsIsNeverMarked(t *testing.T) {
	obj, ok := materializeReader().decode([]byte(materialize(`,"annotations":{"`+Annotation+`":"forged","team":"db"}`, `"1500m"`, "", "")))
	if !ok {
		t.Fatal("not decoded")
	}
	if why, marked := Reason(obj); marked {
		t.Fatalf("marked %q", why)
	}
	if obj.Annotations["team"] != "db" {
		t.Errorf("annotations %v: only the marker goes", obj.Annotations)
	}
	if q := obj.Spec.EnvironmentdResourceRequirements.Requests.Cpu(); q.MilliValue() != 1500 {
		t.Errorf("cpu %v", q)
	}
}

// The reason is the decoder's error, which may quote what the tenant wrote
// (a time it cannot parse): it is cut.
func TestTheReasonIsBounded(t *testing.T) {
	huge := strings.Repeat("9", 1<<20)
	obj, ok := materializeReader().decode([]byte(materialize("", `"1"`, "", `{"rollout":{"startedAt":"`+huge+`"}}`)))
	if !ok {
		t.Fatal("no placeholder")
	}
	if why, _ := Reason(obj); len(why) > maxReasonBytes || !strings.Contains(why, "999") {
		t.Fatalf("reason of %d bytes, want the decoder's error quoting the value, cut to %d", len(why), maxReasonBytes)
	}
}

// Without metadata that reads there is no key to cache an object under:
// it is skipped (the API server never sends one).
func TestAnObjectWithoutMetadataIsSkipped(t *testing.T) {
	for _, raw := range []string{`{"metadata":"mz","spec":{}}`, `[]`, `not json`} {
		if _, ok := materializeReader().decode([]byte(raw)); ok {
			t.Errorf("%s: cached", raw)
		}
	}
}

// A watch stream goes on past an object that does not read: it arrives as
// a placeholder, and the events after it as they are.
func TestAWatchGoesOnPastAnObjectThatDoesNotRead(t *testing.T) {
	r := materializeReader()
	events := strings.Join([]string{
		`{"type":"ADDED","object":` + materialize("", `"1"`, "", "") + `}`,
		`{"type":"MODIFIED","object":` + materialize("", `"1e1.5"`, "", "") + `}`,
		`{"type":"BOOKMARK","object":{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
		`{"type":"MODIFIED","object":` + materialize("", `"2"`, "", "") + `}`,
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410}}`,
	}, "\n")
	w := &stream{result: make(chan watch.Event), body: io.NopCloser(strings.NewReader(events)), done: make(chan struct{})}
	go w.receive(func(raw []byte) (runtime.Object, bool) { return r.decode(raw) })
	var got []string
	for e := range w.ResultChan() {
		desc := string(e.Type)
		switch o := e.Object.(type) {
		case *v1alpha1.Materialize:
			if _, marked := Reason(o); marked {
				desc += " placeholder"
			}
			if o.Annotations["k8s.io/initial-events-end"] == "true" {
				desc += " initial-events-end"
			}
		case *metav1.Status:
			desc += " " + string(o.Reason)
		}
		got = append(got, desc)
	}
	want := []string{"ADDED", "MODIFIED placeholder", "BOOKMARK initial-events-end", "MODIFIED", "ERROR Expired"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// Stop ends a watch whose stream has more to send, and its channel closes.
func TestStopEndsAWatch(t *testing.T) {
	body, writer := io.Pipe()
	w := &stream{result: make(chan watch.Event), body: body, done: make(chan struct{})}
	go w.receive(func([]byte) (runtime.Object, bool) { return &v1alpha1.Materialize{}, true })
	go func() { _, _ = writer.Write([]byte(`{"type":"ADDED","object":{}}`)) }()
	<-w.ResultChan()
	w.Stop()
	for range w.ResultChan() {
	}
}

// Package unreadable lists and watches the operator's custom resources one
// object at a time, so that an object the operator's Go types cannot read
// costs its owner its reconciles, never every tenant the operator's caches.
//
// The API server checks a custom resource against its schema, which is
// looser than the Go types here: upstream's schema gives quantities no
// pattern, so "1e1.5" is stored, which resource.ParseQuantity refuses, and
// "1e-100000000", which it takes longer than anyone waits to read (an
// object holding one is not decoded at all: checkQuantities). client-go decodes
// a LIST page, or a watch stream, as a whole: one such object fails every
// list, the informer never syncs, and no Materialize in the cluster is
// reconciled. Here each object is decoded on its own; one that cannot be
// read is cached as a placeholder (its metadata, the spec's strings that
// read, and its status if that reads) marked with Annotation, which the
// reconcilers report and skip.
package unreadable

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/materializeinc/orchestratord/pkg/boundedtext"
)

const (
	// Annotation marks a cached placeholder; its value says why the object
	// could not be read. Only this package writes it, and only in memory:
	// an object read whole never carries it, whoever wrote it.
	Annotation = "orchestratord.materialize.cloud/unreadable"
	// ReasonUnreadable is the Warning Event of an object not reconciled
	// because it cannot be read.
	ReasonUnreadable = "Unreadable"
	// maxReasonBytes bounds the reason kept: the decoder's error may quote
	// the object's values, which its owner wrote.
	maxReasonBytes = 1024
)

// Object is a custom resource type as the generated clientset has it.
type Object interface {
	runtime.Object
	metav1.Object
}

// Reason returns why obj, a cached placeholder, could not be read.
func Reason(obj metav1.Object) (string, bool) {
	reason, ok := obj.GetAnnotations()[Annotation]
	return reason, ok
}

// Report records on obj, a placeholder, that it is not reconciled and why.
func Report(recorder record.EventRecorder, obj runtime.Object, reason string) {
	recorder.Eventf(obj, corev1.EventTypeWarning, ReasonUnreadable,
		"not reconciled until it is fixed: the operator cannot read this object: %s", reason)
}

// reader lists and watches one resource of client, a typed clientset's REST
// client, decoding each object into a new T with decoder.
type reader[T Object] struct {
	client    rest.Interface
	resource  string
	namespace string
	decoder   runtime.Decoder
	newObject func() T
}

func (r reader[T]) request(opts metav1.ListOptions) *rest.Request {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	// The reader decodes JSON, whatever encoding the client would prefer.
	return r.client.Get().Namespace(r.namespace).Resource(r.resource).SetHeader("Accept", "application/json").
		VersionedParams(&opts, metav1.ParameterCodec).Timeout(timeout)
}

// list returns one page of objects, placeholders included.
func (r reader[T]) list(ctx context.Context, opts metav1.ListOptions) ([]T, metav1.ListMeta, error) {
	result := r.request(opts).Do(ctx)
	// Error, not Raw's error, decodes the API server's Status (a 410 for
	// an expired continue token, which the reflector relists on).
	if err := result.Error(); err != nil {
		return nil, metav1.ListMeta{}, err
	}
	raw, err := result.Raw()
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	var page struct {
		Metadata metav1.ListMeta   `json:"metadata"`
		Items    []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, metav1.ListMeta{}, err
	}
	items := make([]T, 0, len(page.Items))
	for _, item := range page.Items {
		if obj, ok := r.decode(item); ok {
			items = append(items, obj)
		}
	}
	return items, page.Metadata, nil
}

// decode reads one object whole or, failing that, as a placeholder; ok is
// false only for an object without readable metadata, which has no key to
// cache it under (the API server never sends one).
func (r reader[T]) decode(raw []byte) (obj T, ok bool) {
	obj = r.newObject()
	err := checkQuantities(raw)
	if err == nil {
		_, _, err = r.decoder.Decode(raw, nil, obj)
	}
	if err == nil {
		if a := obj.GetAnnotations(); a != nil {
			delete(a, Annotation)
		}
		return obj, true
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		var zero T
		return zero, false
	}
	// Of the spec, which did not read, the strings that read on their own
	// are kept, spec.environmentId among them: the object still holds its
	// environment's id against another Materialize taking it. A status
	// this operator wrote is kept when it reads, for the metrics. Failing
	// that, less.
	fields["spec"] = r.readableStrings(fields)
	for _, drop := range []string{"", "status", "spec"} {
		delete(fields, drop)
		if placeholder, ok := r.placeholder(fields, err); ok {
			return placeholder, true
		}
	}
	var zero T
	return zero, false
}

// readableStrings is the members of the object's spec whose values are
// strings that decode (a quantity written as a string may not); {} when
// the spec is not an object.
func (r reader[T]) readableStrings(fields map[string]json.RawMessage) json.RawMessage {
	var members map[string]json.RawMessage
	if json.Unmarshal(fields["spec"], &members) != nil {
		return json.RawMessage("{}")
	}
	for key, value := range members {
		if len(value) == 0 || value[0] != '"' {
			delete(members, key)
			continue
		}
		alone, _ := json.Marshal(map[string]any{"apiVersion": fields["apiVersion"], "kind": fields["kind"],
			"spec": map[string]json.RawMessage{key: value}})
		if checkQuantities(alone) != nil {
			delete(members, key)
		} else if _, _, err := r.decoder.Decode(alone, nil, r.newObject()); err != nil {
			delete(members, key)
		}
	}
	out, err := json.Marshal(members)
	if err != nil {
		return json.RawMessage("{}")
	}
	return out
}

// placeholder decodes fields, what is left of an object, marked with why
// the whole could not be read.
func (r reader[T]) placeholder(fields map[string]json.RawMessage, why error) (T, bool) {
	var zero T
	partial, err := json.Marshal(fields)
	if err != nil {
		return zero, false
	}
	obj := r.newObject()
	if _, _, err := r.decoder.Decode(partial, nil, obj); err != nil {
		return zero, false
	}
	a := obj.GetAnnotations()
	if a == nil {
		a = make(map[string]string, 1)
	}
	a[Annotation] = boundedtext.Cut(why.Error(), maxReasonBytes)
	obj.SetAnnotations(a)
	return obj, true
}

// watch streams events, each object decoded on its own (decode).
func (r reader[T]) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	body, err := r.request(opts).Stream(ctx)
	if err != nil {
		return nil, err
	}
	w := &stream{result: make(chan watch.Event), body: body, done: make(chan struct{})}
	go w.receive(func(raw []byte) (runtime.Object, bool) { return r.decode(raw) })
	return w, nil
}

// stream is a watch over a response body of JSON watch events.
type stream struct {
	result chan watch.Event
	body   io.ReadCloser
	done   chan struct{}
	once   sync.Once
}

func (s *stream) ResultChan() <-chan watch.Event { return s.result }

func (s *stream) Stop() {
	s.once.Do(func() {
		close(s.done)
		_ = s.body.Close()
	})
}

// receive sends the stream's events until it ends or is stopped. A frame
// that is not a watch event ends the watch, as client-go's own does: the
// informer watches again from the last resourceVersion it saw.
func (s *stream) receive(decode func([]byte) (runtime.Object, bool)) {
	defer close(s.result)
	defer s.Stop()
	dec := json.NewDecoder(s.body)
	for {
		var event struct {
			Type   watch.EventType `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&event); err != nil {
			return
		}
		var obj runtime.Object
		switch event.Type {
		case watch.Error:
			status := &metav1.Status{}
			if json.Unmarshal(event.Object, status) != nil {
				return
			}
			obj = status
		case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
			decoded, ok := decode(event.Object)
			if !ok {
				continue
			}
			obj = decoded
		default:
			return
		}
		select {
		case s.result <- watch.Event{Type: event.Type, Object: obj}:
		case <-s.done:
			return
		}
	}
}

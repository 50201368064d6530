// Package webhook serves the Materialize CRD conversion webhook: the
// ConversionReview handler, health endpoints, metrics and graceful shutdown.
package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
	"unsafe"

	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/jsonvalue"
)

// Sizing, measured by BenchmarkReview and docs/benchmarks.md: a review's
// live heap peaks at about 7.5 times its body (the decoded objects, their
// conversions and the encoded response). The API server sends one review
// per get and one per LIST page (500 objects from client-go, about 0.6 MiB
// of Materializes; 2-3 MiB with long managedFields); only an unpaginated
// LIST of thousands of objects comes near the request limit.
const (
	// DefaultMaxRequestBytes bounds a ConversionReview body.
	DefaultMaxRequestBytes = 16 << 20
	// DefaultMaxInFlightBytes bounds the bodies of the reviews answered at
	// once: about 180 MiB of live heap, within the chart's 256 MiB limit.
	DefaultMaxInFlightBytes = 24 << 20
	// DefaultMaxInFlightReviews bounds how many reviews are answered at once.
	DefaultMaxInFlightReviews = 64
	// DefaultBodyReadTimeout bounds reading an admitted review's body: the
	// API server sends it at once (16 MiB is well under a second on any
	// cluster network), so a client that trickles its body holds a share
	// of the in-flight budget for this long, not for the server's 30 s
	// read timeout.
	DefaultBodyReadTimeout = 5 * time.Second
)

// ConvertHandler answers ConversionReview v1 requests.
type ConvertHandler struct {
	Log             *zap.Logger
	Metrics         *Metrics
	MaxRequestBytes int64
	// MaxInFlightBytes and MaxInFlightReviews bound the reviews answered at
	// once, by body size and by count (zero means the defaults). A review
	// beyond them is answered 429 with Retry-After, which the API server's
	// webhook client retries, instead of costing the replica its memory.
	// One review is always admitted when none is in flight.
	MaxInFlightBytes   int64
	MaxInFlightReviews int
	// BodyReadTimeout bounds reading a body once admitted (zero means
	// DefaultBodyReadTimeout).
	BodyReadTimeout time.Duration

	mu              sync.Mutex
	inFlightBytes   int64
	inFlightReviews int
}

// admit reserves room for a review of up to size bytes.
func (h *ConvertHandler) admit(size int64) bool {
	maxBytes, maxReviews := h.MaxInFlightBytes, h.MaxInFlightReviews
	if maxBytes <= 0 {
		maxBytes = DefaultMaxInFlightBytes
	}
	if maxReviews <= 0 {
		maxReviews = DefaultMaxInFlightReviews
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inFlightReviews > 0 && (h.inFlightReviews >= maxReviews || h.inFlightBytes+size > maxBytes) {
		return false
	}
	h.inFlightReviews++
	h.inFlightBytes += size
	return true
}

func (h *ConvertHandler) release(size int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inFlightReviews--
	h.inFlightBytes -= size
}

func (h *ConvertHandler) requestLimit() int64 {
	if h.MaxRequestBytes > 0 {
		return h.MaxRequestBytes
	}
	return DefaultMaxRequestBytes
}

type reviewError struct {
	status int
	msg    string
}

func (h *ConvertHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if limit := h.requestLimit(); r.ContentLength > limit {
		// Refused before it takes any of the in-flight budget.
		h.Log.Info("rejected conversion request", zap.Int("status", http.StatusRequestEntityTooLarge), zap.Int64("bytes", r.ContentLength))
		h.Metrics.latency.WithLabelValues("bad_request").Observe(time.Since(start).Seconds())
		http.Error(w, fmt.Sprintf("body larger than %d bytes", limit), http.StatusRequestEntityTooLarge)
		return
	}
	// A body of unknown length may be as large as the limit.
	size := h.requestLimit()
	if r.ContentLength >= 0 {
		size = r.ContentLength
	}
	if !h.admit(size) {
		h.Log.Debug("conversion request throttled", zap.Int64("bytes", size))
		h.Metrics.latency.WithLabelValues("throttled").Observe(time.Since(start).Seconds())
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many conversions in flight; retry", http.StatusTooManyRequests)
		return
	}
	defer h.release(size)
	h.Metrics.inFlight.Inc()
	defer h.Metrics.inFlight.Dec()

	review, rerr := h.readReview(w, r)
	if rerr != nil {
		h.Log.Info("rejected conversion request", zap.Int("status", rerr.status), zap.String("reason", rerr.msg))
		h.Metrics.latency.WithLabelValues("bad_request").Observe(time.Since(start).Seconds())
		http.Error(w, rerr.msg, rerr.status)
		return
	}
	h.Metrics.objects.Observe(float64(len(review.objects)))
	// Converted objects grow by their carry annotation and hashes.
	buf := responses.Get().(*[]byte)
	out := slices.Grow((*buf)[:0], len(review.body)*3/2+512)
	defer func() {
		// Write keeps nothing of out (io.Writer's contract); a buffer grown
		// by a large review is left to the collector.
		if cap(out) <= maxPooledResponse {
			*buf = out[:0]
			responses.Put(buf)
		}
	}()
	out = append(out, `{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","response":{"uid":`...)
	out = jsonvalue.AppendString(out, review.uid)
	out = append(out, `,"convertedObjects":`...)
	result := "success"
	if converted, failure := h.convert(r.Context(), review, append(out, '[')); failure == "" {
		out = append(converted, `],"result":{"metadata":{},"status":"Success"}}}`...)
	} else {
		result = "failure"
		h.Log.Info("conversion failed", zap.String("uid", review.uid),
			zap.String("desiredAPIVersion", review.desiredAPIVersion), zap.String("reason", failure))
		out = append(out, `null,"result":{"metadata":{},"status":"Failure","message":`...)
		out = append(jsonvalue.AppendString(out, failure), "}}}"...)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
	h.Metrics.latency.WithLabelValues(result).Observe(time.Since(start).Seconds())
}

// responses are the buffers responses are written into, reused: a
// review's response is its largest single allocation.
var responses = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledResponse bounds the buffers kept between reviews (a 500-object
// LIST page needs about 1 MiB): an idle webhook does not hold large ones.
const maxPooledResponse = 256 << 10

// readBodyWithin is readBody bounded by timeout. The read deadline is set
// only once the timeout has passed: over HTTP/2 (the API server's) setting
// one is a round trip through the connection's serving goroutine, which
// would cost every review two of them.
func readBodyWithin(w http.ResponseWriter, body io.Reader, contentLength int64, timeout time.Duration) (string, error) {
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	done, expired := false, false
	timer := time.AfterFunc(timeout, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			expired = true
			// A recorder in a unit test cannot; nothing would be reading.
			_ = rc.SetReadDeadline(time.Now())
		}
	})
	out, err := readBody(body, contentLength)
	timer.Stop()
	mu.Lock()
	done = true
	mu.Unlock()
	if expired {
		// Answering takes what it takes (the write timeout bounds it); over
		// HTTP/1 a read deadline still set would close the connection.
		_ = rc.SetReadDeadline(time.Time{})
	}
	return out, err
}

// readBody reads all of body, in a buffer sized by the request's
// Content-Length (which the caller has checked against the limit), into a
// string that the decoded objects' strings then share.
func readBody(body io.Reader, contentLength int64) (string, error) {
	buf := bytes.NewBuffer(make([]byte, 0, max(contentLength, 0)+bytes.MinRead))
	if _, err := buf.ReadFrom(body); err != nil {
		return "", err
	}
	b := buf.Bytes()
	if len(b) == 0 {
		return "", nil
	}
	// Nothing writes to b after this: the string is its only reference,
	// which spares a copy of every body (up to 16 MiB).
	return unsafe.String(&b[0], len(b)), nil
}

// review is the request of a ConversionReview, decoded in one pass; the
// response is written by hand around the converted objects, so no object
// is encoded or validated twice.
type review struct {
	body                   string
	uid, desiredAPIVersion string
	objects                []any
}

func (h *ConvertHandler) readReview(w http.ResponseWriter, r *http.Request) (*review, *reviewError) {
	if r.Method != http.MethodPost {
		return nil, &reviewError{http.StatusMethodNotAllowed, "only POST is allowed"}
	}
	// The API server sends exactly application/json; parameters are parsed
	// only when there are any.
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, &reviewError{http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q: want application/json", ct)}
		}
	}
	limit := h.requestLimit()
	timeout := h.BodyReadTimeout
	if timeout <= 0 {
		timeout = DefaultBodyReadTimeout
	}
	body, err := readBodyWithin(w, http.MaxBytesReader(w, r.Body, limit), r.ContentLength, timeout)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &reviewError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", limit)}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, &reviewError{http.StatusRequestTimeout, fmt.Sprintf("body not received within %v", timeout)}
		}
		return nil, &reviewError{http.StatusBadRequest, "reading body: " + err.Error()}
	}
	h.Metrics.bytes.Observe(float64(len(body)))
	rv, msg := parseReview(body)
	if msg != "" {
		return nil, &reviewError{http.StatusBadRequest, msg}
	}
	return rv, nil
}

// parseReview reads the fields of a ConversionReview the webhook uses;
// a malformed review is described in the returned message.
func parseReview(body string) (*review, string) {
	v, err := jsonvalue.DecodeString(body)
	if err != nil {
		return nil, "body is not a ConversionReview: " + err.Error()
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, "body is not a ConversionReview: not a JSON object"
	}
	apiVersion, _ := top["apiVersion"].(string)
	kind, _ := top["kind"].(string)
	if apiVersion != apiextensionsv1.SchemeGroupVersion.String() || kind != "ConversionReview" {
		return nil, fmt.Sprintf("want apiextensions.k8s.io/v1 ConversionReview, got %s %s", apiVersion, kind)
	}
	request, ok := top["request"].(map[string]any)
	if !ok {
		return nil, "ConversionReview has no request"
	}
	rv := &review{body: body}
	for field, dst := range map[string]*string{"uid": &rv.uid, "desiredAPIVersion": &rv.desiredAPIVersion} {
		if v, present := request[field]; present && v != nil {
			if *dst, ok = v.(string); !ok {
				return nil, fmt.Sprintf("request.%s: must be a string", field)
			}
		}
	}
	if objects, present := request["objects"]; present && objects != nil {
		if rv.objects, ok = objects.([]any); !ok {
			return nil, "request.objects: must be a list"
		}
	}
	return rv, ""
}

// convert appends every object converted, comma-separated, to out, or
// returns why one could not be: one failure fails the review, as the API
// server requires.
func (h *ConvertHandler) convert(ctx context.Context, rv *review, out []byte) (_ []byte, failure string) {
	to := versionLabel(rv.desiredAPIVersion)
	defer func() {
		// A bug must cost one request, never the process or a hung connection.
		if p := recover(); p != nil {
			h.Log.Error("panic converting objects", zap.Any("panic", p), zap.String("uid", rv.uid))
			h.Metrics.conversions.WithLabelValues("failure", "", to).Inc()
			failure = "internal error converting objects"
		}
	}()
	if rv.uid == "" {
		return nil, "request.uid is empty"
	}
	// Counted once the review succeeds: a LIST page is 500 objects, nearly
	// always of one version.
	converted := map[string]float64{}
	for i, v := range rv.objects {
		obj, ok := v.(map[string]any)
		if !ok {
			h.Metrics.conversions.WithLabelValues("failure", "", to).Inc()
			return nil, fmt.Sprintf("objects[%d]: not a JSON object", i)
		}
		// A client that gave up gets no more work done for it.
		if err := ctx.Err(); err != nil {
			return nil, "request ended: " + err.Error()
		}
		from, _ := obj["apiVersion"].(string)
		result, err := conversion.ConvertObserved(obj, rv.desiredAPIVersion, func(annotation, reason string) {
			// A tenant's hand-written annotation: logged and counted, never trusted.
			h.Log.Info("carry annotation ignored", zap.String("object", objectName(obj)), zap.String("annotation", annotation), zap.String("reason", reason))
			h.Metrics.carry.WithLabelValues(carryLabel(annotation)).Inc()
		})
		if err != nil {
			h.Metrics.conversions.WithLabelValues("failure", versionLabel(from), to).Inc()
			return nil, fmt.Sprintf("objects[%d] (%s): %v", i, objectName(obj), err)
		}
		if i > 0 {
			out = append(out, ',')
		}
		if out, err = jsonvalue.Append(out, result); err != nil {
			return nil, fmt.Sprintf("objects[%d] (%s): encoding: %v", i, objectName(obj), err)
		}
		// The decoded object is garbage once written.
		rv.objects[i] = nil
		converted[versionLabel(from)]++
	}
	for from, n := range converted {
		h.Metrics.conversions.WithLabelValues("success", from, to).Add(n)
	}
	return out, ""
}

// carryLabel keeps the carry metric's label to the two annotation names.
func carryLabel(annotation string) string {
	if annotation == conversion.AnnotationPrefix+"v1" {
		return conversion.AnnotationPrefix + "v1"
	}
	return conversion.AnnotationPrefix + "v1alpha1"
}

// versionLabel keeps metric labels to a closed set: the request is not
// trusted (any pod can reach the port), and every distinct value would be
// a new series.
// The values are constants, never the request's strings: those share the
// body's memory (readBody), which a metric's label would keep alive.
func versionLabel(apiVersion string) string {
	switch apiVersion {
	case conversion.V1Alpha1:
		return conversion.V1Alpha1
	case conversion.V1:
		return conversion.V1
	case "":
		return ""
	}
	return "other"
}

func objectName(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

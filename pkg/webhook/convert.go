// Package webhook serves the Materialize CRD conversion webhook: the
// ConversionReview handler, health endpoints, metrics and graceful shutdown.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/materializeinc/orchestratord/pkg/boundedtext"
	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/jsonvalue"
	"github.com/materializeinc/orchestratord/pkg/tracing"
)

const (
	// DefaultMaxRequestBytes bounds a ConversionReview body. The API
	// server sends one review per get and one per LIST page (500 objects
	// from client-go, about 0.6 MiB of Materializes; 2-3 MiB with long
	// managedFields); only an unpaginated LIST of thousands of objects
	// comes near it.
	DefaultMaxRequestBytes = 16 << 20
	// DefaultMaxInFlightReviews bounds how many reviews are answered at once.
	DefaultMaxInFlightReviews = 64
	// DefaultBodyReadTimeout is how long a body may take before it must
	// be arriving at DefaultMinBodyRate, and how long it may stop: the API
	// server sends it at once (16 MiB is well under a second on any
	// cluster network), so a client that trickles its body holds its
	// connection and the memory its bytes take for this long, not for the
	// server's read timeout.
	DefaultBodyReadTimeout = 5 * time.Second
	// DefaultMinBodyRate extends that time by a second for each 256 KiB
	// that arrived: a replica slowed by its own load reads a steady API
	// server's body more slowly (over HTTP/2 each 64 KiB of a stream,
	// h2StreamWindow, waits for the window update the handler's read
	// sends), and that is not the client's fault. Once a 408 here cost a
	// good 12 MiB review under the hostile load of a busy machine.
	DefaultMinBodyRate = 256 << 10
	// maxBodyReadTime ends every read: the API server gives a conversion
	// 30 s, and the server's ReadTimeout and WriteTimeout (30 s from the
	// request's start) must leave time to answer the 408.
	maxBodyReadTime = 25 * time.Second
)

// ConvertHandler answers ConversionReview v1 requests.
type ConvertHandler struct {
	Log             *zap.Logger
	Metrics         *Metrics
	MaxRequestBytes int64
	// MaxInFlightMemory bounds the heap the reviews being read and
	// answered may cost together (admission.go; zero means
	// DefaultMaxInFlightMemory; InFlightMemoryFor sizes it by the memory
	// limit). A review beyond it, or beyond
	// MaxInFlightReviews at once, is answered 429 with Retry-After, which
	// the API server's webhook client retries, instead of costing the
	// replica its memory; a review that would cost more than all of it is
	// refused with 413.
	MaxInFlightMemory  int64
	MaxInFlightReviews int
	// BodyReadTimeout and MinBodyRate bound reading a body: it is
	// answered 408 once it has taken BodyReadTimeout plus a second for
	// each MinBodyRate bytes that arrived (zero means the Default), or
	// once nothing came for BodyReadTimeout, and at 25 s in any case.
	BodyReadTimeout time.Duration
	MinBodyRate     int64

	budget budget
	// afterBodyRead, in tests, runs between a body's last read and the end
	// of its deadline, where a test makes the deadline fire.
	afterBodyRead func()
}

func (h *ConvertHandler) requestLimit() int64 {
	if h.MaxRequestBytes > 0 {
		return h.MaxRequestBytes
	}
	return DefaultMaxRequestBytes
}

func (h *ConvertHandler) memoryLimit() int64 {
	if h.MaxInFlightMemory > 0 {
		return h.MaxInFlightMemory
	}
	return DefaultMaxInFlightMemory
}

func (h *ConvertHandler) reviewLimit() int64 {
	if h.MaxInFlightReviews > 0 {
		return int64(h.MaxInFlightReviews)
	}
	return DefaultMaxInFlightReviews
}

type reviewError struct {
	status int
	msg    string
}

// result is the latency metric's result label of a refused review.
func (e *reviewError) result() string {
	if e.status == http.StatusTooManyRequests {
		return "throttled"
	}
	return "bad_request"
}

func (h *ConvertHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// While tracing is off this is an atomic load: no allocation.
	ctx, span := tracing.StartServer(r.Context(), r.Header, spanName)
	defer span.End()
	log := h.Log
	if span.IsRecording() {
		log = tracing.Logger(log, span)
	}
	refuse := func(result string, rerr *reviewError) {
		rerr.msg = boundedtext.Cut(rerr.msg, maxMessageBytes)
		log.Info("rejected conversion request", zap.Int("status", rerr.status), zap.String("reason", rerr.msg))
		if span.IsRecording() {
			span.SetAttributes(attribute.String("result", result), attribute.Int("http.response.status_code", rerr.status))
			tracing.SetError(span, rerr.msg)
		}
		h.Metrics.latency.WithLabelValues(result).Observe(time.Since(start).Seconds())
		if rerr.status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		if r.ProtoMajor == 1 && (r.ContentLength != 0 || r.TransferEncoding != nil) {
			// The body may be unread: without this Go's HTTP/1 server reads
			// what is left of it, however slowly it comes, before it answers.
			w.Header().Set("Connection", "close")
		}
		http.Error(w, rerr.msg, rerr.status)
	}
	memory := h.memoryLimit()
	// The request's headers and goroutine, until it is answered.
	if !h.chargeUpTo(requestMemory, memory) {
		refuse("throttled", &reviewError{http.StatusTooManyRequests, "too many conversions in flight; retry"})
		return
	}
	defer h.refund(requestMemory)
	if limit := h.requestLimit(); r.ContentLength > limit {
		refuse("bad_request", &reviewError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", limit)})
		return
	}
	body, charged, deadlineFired, rerr := h.readBody(w, r, memory)
	defer h.refund(charged)
	if rerr != nil {
		refuse(rerr.result(), rerr)
		return
	}
	if deadlineFired {
		// Over HTTP/1, the body's deadline fired as its last byte came. Go's
		// server, already waiting for the next request, then failed its read
		// and cancelled the connection's context: that says nothing of this
		// review's client, which is answered. The connection, whose every
		// later request would start cancelled, is closed.
		ctx = context.WithoutCancel(ctx)
		w.Header().Set("Connection", "close")
	}
	// JSON between systems is UTF-8 (RFC 8259), and the API server's always
	// is; upstream's webhook refuses anything else too. Checked before
	// decoding, because an invalid byte decodes to three (U+FFFD): a body
	// of invalid bytes would cost three times its size to refuse.
	if !utf8.ValidString(body) {
		refuse("bad_request", &reviewError{http.StatusBadRequest, "body is not valid UTF-8"})
		return
	}
	cost, responseShare := reviewCost(body)
	// Besides what reviews leave for connections (its own among them), it
	// could never be admitted.
	if connectionReserve+requestMemory+charged+cost > memory {
		refuse("bad_request", &reviewError{http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"converting this review would take about %d MiB, more than the webhook's in-flight memory allows a review (%d MiB); page the request", (requestMemory+charged+cost)>>20, (memory-connectionReserve)>>20)})
		return
	}
	if !h.budget.admitReview(cost, memory, h.reviewLimit()) {
		refuse("throttled", &reviewError{http.StatusTooManyRequests, "too many conversions in flight; retry"})
		return
	}
	h.Metrics.inFlightMemory.Add(float64(cost))
	defer func() {
		h.budget.releaseReview(cost)
		h.Metrics.inFlightMemory.Sub(float64(cost))
	}()
	h.Metrics.inFlight.Inc()
	defer h.Metrics.inFlight.Dec()

	review, msg := parseReview(body)
	if msg != "" {
		refuse("bad_request", &reviewError{http.StatusBadRequest, msg})
		return
	}
	review.responseShare, review.held = responseShare, requestMemory+charged+cost
	h.Metrics.objects.Observe(float64(len(review.objects)))
	if span.IsRecording() {
		// A copy (tracing.Text): the review's strings share the body's buffer.
		span.SetAttributes(attribute.String("uid", tracing.Text(review.uid)), // at most maxUIDBytes
			attribute.String("desiredAPIVersion", versionLabel(review.desiredAPIVersion)), attribute.Int("objects", len(review.objects)))
	}
	// What the response took beyond its share is refunded once it is
	// written and recycled (deferred calls run last first).
	defer func() { h.refund(review.extra) }()
	resp := newResponse()
	defer resp.recycle()
	header := func() {
		resp.out = append(resp.out, `{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","response":{"uid":`...)
		resp.out = jsonvalue.AppendString(resp.out, review.uid)
		resp.out = append(resp.out, `,"convertedObjects":`...)
	}
	header()
	resp.out = append(resp.out, '[')
	result := "success"
	failure, outgrown := h.convert(ctx, log, review, resp)
	if outgrown != nil {
		refuse(outgrown.result(), outgrown)
		return
	}
	if failure = boundedtext.Cut(failure, maxMessageBytes); failure == "" {
		resp.out = append(resp.out, `],"result":{"metadata":{},"status":"Success"}}}`...)
		markProven(r.Context())
	} else {
		result = "failure"
		log.Info("conversion failed", zap.String("uid", review.uid),
			zap.String("desiredAPIVersion", echo(review.desiredAPIVersion)), zap.String("reason", failure))
		tracing.SetError(span, failure)
		resp.reset()
		header()
		resp.out = append(resp.out, `null,"result":{"metadata":{},"status":"Failure","message":`...)
		resp.out = append(jsonvalue.AppendString(resp.out, failure), "}}}"...)
	}
	w.Header()["Content-Type"] = jsonContentType
	resp.writeTo(w)
	h.Metrics.latency.WithLabelValues(result).Observe(time.Since(start).Seconds())
	if span.IsRecording() {
		span.SetAttributes(attribute.String("result", result))
	}
}

// responseCharge is the step in which a response that outgrows its share
// of a review's charge is charged more.
const responseCharge = 64 << 10

// jsonContentType is every answer's Content-Type, shared: Header.Set
// would allocate it per review. net/http only reads it.
var jsonContentType = []string{"application/json"}

// spanName names the span of each review.
const spanName = "ConversionReview"

// chargeUpTo charges n for a review while what is charged stays within
// limit, less what new connections are kept (budget.charge).
func (h *ConvertHandler) chargeUpTo(n, limit int64) bool {
	if !h.budget.charge(n, limit) {
		return false
	}
	h.Metrics.inFlightMemory.Add(float64(n))
	return true
}

// chargeConnectionShare charges an open connection's memory while
// connections hold at most half the budget: idle connections never leave
// the reviews less than the other half (budget.chargeConnection).
func (h *ConvertHandler) chargeConnectionShare(n int64) bool {
	if !h.budget.chargeConnection(n, h.memoryLimit()) {
		return false
	}
	h.Metrics.inFlightMemory.Add(float64(n))
	return true
}

func (h *ConvertHandler) refundConnection(n int64) {
	h.budget.refundConnection(n)
	h.Metrics.inFlightMemory.Sub(float64(n))
}

// refund returns what a body buffer was charged.
func (h *ConvertHandler) refund(charged int64) {
	h.budget.refund(charged)
	h.Metrics.inFlightMemory.Sub(float64(charged))
}

// readBodyWithin is readCharged bounded by a deadline: grace, plus a
// second for each minRate bytes read while bytes keep coming (a body that
// stops is cut grace after its last byte, so a burst buys no time to hold
// its buffer idle), and maxBodyReadTime at most. The read deadline is set
// only once it has passed: over HTTP/2 (the API server's) setting one is a
// round trip through the connection's serving goroutine, which would cost
// every review two of them. The bool: the body came whole over HTTP/1,
// but the deadline fired too.
func readBodyWithin(w http.ResponseWriter, r *http.Request, body io.Reader, limit int64, grace time.Duration, minRate int64,
	charge func(int64) bool, refund func(int64), afterRead func()) ([]byte, int64, bool, error) {
	rc := http.NewResponseController(w)
	start := time.Now()
	counted := &countingReader{r: body, start: start}
	var mu sync.Mutex
	done, expired := false, false
	var timer *time.Timer
	mu.Lock() // the callback may not Reset the timer before it is assigned
	timer = time.AfterFunc(min(grace, maxBodyReadTime), func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		earned := time.Duration(float64(counted.n.Load()) / float64(minRate) * float64(time.Second))
		until := min(grace+earned, time.Duration(counted.last.Load())+grace, maxBodyReadTime)
		if left := until - time.Since(start); left > 0 {
			timer.Reset(left)
			return
		}
		expired = true
		// A recorder in a unit test cannot; nothing would be reading.
		_ = rc.SetReadDeadline(time.Now())
	})
	mu.Unlock()
	out, charged, err := readCharged(counted, r.ContentLength, limit, charge, refund)
	if afterRead != nil {
		afterRead()
	}
	mu.Lock()
	done = true // before Stop: a callback running now must not Reset it
	mu.Unlock()
	timer.Stop()
	if expired && r.ProtoMajor > 1 {
		// Over HTTP/2 the deadline is the stream's, which the answer does
		// not need; over HTTP/1 it stays, and the connection is closed
		// after the answer.
		_ = rc.SetReadDeadline(time.Time{})
	}
	return out, charged, expired && err == nil && r.ProtoMajor == 1, err
}

// countingReader counts what was read, and when the last of it came
// (since start), for the timer's goroutine.
type countingReader struct {
	r     io.Reader
	start time.Time
	n     atomic.Int64
	last  atomic.Int64 // a time.Duration
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n.Add(int64(n))
		c.last.Store(int64(time.Since(c.start)))
	}
	return n, err
}

// readBody checks a request's method and content type and reads its body,
// charging the memory it holds to the in-flight budget; charged is what
// the caller refunds once done with the body. The string shares the
// buffer, as the decoded objects' strings then do.
// deadlineFired: the body came whole over HTTP/1, but its deadline fired
// too (readBodyWithin).
func (h *ConvertHandler) readBody(w http.ResponseWriter, r *http.Request, memory int64) (_ string, charged int64, deadlineFired bool, _ *reviewError) {
	if r.Method != http.MethodPost {
		return "", 0, false, &reviewError{http.StatusMethodNotAllowed, "only POST is allowed"}
	}
	// The API server sends exactly application/json; parameters are parsed
	// only when there are any.
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return "", 0, false, &reviewError{http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q: want application/json", echo(ct))}
		}
	}
	// A body that could not be admitted now is refused before it is read:
	// its client retries it (the API server on a 429) and would send all
	// of it again each time, taking the connection's flow-control window
	// from the reviews being read (under hostile load, once enough for a
	// good review to get a 408). One that could never be admitted is
	// read, to be refused 413 with its cost.
	if least := leastChargeFor(r.ContentLength); r.ContentLength > 0 && connectionReserve+requestMemory+least <= memory &&
		!h.budget.couldCharge(least, memory) {
		return "", 0, false, &reviewError{http.StatusTooManyRequests, "too many conversions in flight; retry"}
	}
	limit := h.requestLimit()
	grace, minRate := h.BodyReadTimeout, h.MinBodyRate
	if grace <= 0 {
		grace = DefaultBodyReadTimeout
	}
	if minRate <= 0 {
		minRate = DefaultMinBodyRate
	}
	charge := func(n int64) bool { return h.chargeUpTo(n, memory) }
	started := time.Now()
	b, charged, deadlineFired, err := readBodyWithin(w, r, http.MaxBytesReader(w, r.Body, limit), limit, grace, minRate, charge, h.refund, h.afterBodyRead)
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return "", charged, false, &reviewError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", limit)}
		case errors.Is(err, os.ErrDeadlineExceeded):
			return "", charged, false, &reviewError{http.StatusRequestTimeout, fmt.Sprintf(
				"body not received in time (%v, then %d bytes/s while it arrives): %d bytes (Content-Length %d) in %v",
				grace, minRate, len(b), r.ContentLength, time.Since(started).Round(time.Millisecond))}
		case errors.Is(err, errNoMemory):
			return "", charged, false, &reviewError{http.StatusTooManyRequests, "too many conversions in flight; retry"}
		}
		return "", charged, false, &reviewError{http.StatusBadRequest, "reading body: " + err.Error()}
	}
	h.Metrics.bytes.Observe(float64(len(b)))
	if len(b) == 0 {
		return "", charged, deadlineFired, nil
	}
	// Nothing writes to b after this: the string is its only reference,
	// which spares a copy of every body (up to 16 MiB).
	return unsafe.String(&b[0], len(b)), charged, deadlineFired, nil
}

// review is the request of a ConversionReview, decoded in one pass; the
// response is written by hand around the converted objects, so no object
// is encoded or validated twice.
type review struct {
	body                   string
	uid, desiredAPIVersion string
	objects                []any
	// responseShare is what the review was charged for its response;
	// held, all it was charged; extra, what its response took beyond
	// responseShare, charged as it grew (convert).
	responseShare, held, extra int64
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
		return nil, fmt.Sprintf("want apiextensions.k8s.io/v1 ConversionReview, got %q %q", echo(apiVersion), echo(kind))
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
	// The uid is echoed whole in the answer (the API server matches it):
	// the API server's are UUIDs, so a longer one is not the API server's.
	if len(rv.uid) > maxUIDBytes {
		return nil, fmt.Sprintf("request.uid: longer than %d bytes", maxUIDBytes)
	}
	if objects, present := request["objects"]; present && objects != nil {
		if rv.objects, ok = objects.([]any); !ok {
			return nil, "request.objects: must be a list"
		}
	}
	return rv, ""
}

// convert appends every object converted, comma-separated, to resp, or
// returns why one could not be: one failure fails the review, as the API
// server requires.
// outgrown refuses a review whose response outgrew what the budget has
// room for: 429 while other reviews hold the rest (the API server
// retries), 413 when it would not fit in the whole budget.
func (h *ConvertHandler) convert(ctx context.Context, log *zap.Logger, rv *review, resp *response) (failure string, outgrown *reviewError) {
	to := versionLabel(rv.desiredAPIVersion)
	defer func() {
		// A bug must cost one request, never the process or a hung connection.
		if p := recover(); p != nil {
			log.Error("panic converting objects", zap.String("panic", boundedtext.Cut(fmt.Sprint(p), maxMessageBytes)), zap.String("uid", rv.uid))
			h.Metrics.conversions.WithLabelValues("failure", "", to).Inc()
			failure = "internal error converting objects"
		}
	}()
	if rv.uid == "" {
		return "request.uid is empty", nil
	}
	// Counted once the review succeeds: a LIST page is 500 objects, nearly
	// always of one version.
	converted := map[string]float64{}
	// The carry annotations a conversion adds (up to 16 KiB each) can make
	// the response outgrow its share of the charge: the rest is charged as
	// it grows, a chunk at a time, or the review fails before it is built.
	allowed := rv.responseShare
	for i, v := range rv.objects {
		obj, ok := v.(map[string]any)
		if !ok {
			h.Metrics.conversions.WithLabelValues("failure", "", to).Inc()
			return fmt.Sprintf("objects[%d]: not a JSON object", i), nil
		}
		// A client that gave up gets no more work done for it.
		if err := ctx.Err(); err != nil {
			return "request ended: " + err.Error(), nil
		}
		from, _ := obj["apiVersion"].(string)
		result, err := conversion.ConvertOwned(obj, rv.desiredAPIVersion, func(annotation, reason string) {
			// A tenant's hand-written annotation, never trusted, or a carry
			// left out for its size: logged and counted.
			log.Info("carry annotation ignored", zap.String("object", objectName(obj)), zap.String("annotation", annotation), zap.String("reason", echo(reason)))
			h.Metrics.carry.WithLabelValues(carryLabel(annotation)).Inc()
		})
		if err != nil {
			h.Metrics.conversions.WithLabelValues("failure", versionLabel(from), to).Inc()
			return fmt.Sprintf("objects[%d] (%s): %v", i, objectName(obj), err), nil
		}
		if i > 0 {
			resp.out = append(resp.out, ',')
		}
		if resp.out, err = jsonvalue.Append(resp.out, result); err != nil {
			return fmt.Sprintf("objects[%d] (%s): encoding: %v", i, objectName(obj), err), nil
		}
		// The decoded object is garbage once written.
		rv.objects[i] = nil
		if over := resp.size() - allowed; over > 0 {
			more := (over + responseCharge - 1) / responseCharge * responseCharge
			if memory := h.memoryLimit(); !h.chargeUpTo(more, memory) {
				if connectionReserve+rv.held+rv.extra+more > memory {
					return "", &reviewError{http.StatusRequestEntityTooLarge, fmt.Sprintf(
						"the converted objects outgrow the webhook's in-flight memory for a review (%d MiB); page the request", (memory-connectionReserve)>>20)}
				}
				return "", &reviewError{http.StatusTooManyRequests, "too many conversions in flight; retry"}
			}
			allowed, rv.extra = allowed+more, rv.extra+more
		}
		resp.next()
		converted[versionLabel(from)]++
	}
	for from, n := range converted {
		h.Metrics.conversions.WithLabelValues("success", from, to).Add(n)
	}
	return "", nil
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

// objectName names an object for a message, cut: its namespace and name
// come from the request.
func objectName(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	if ns == "" {
		return echo(name)
	}
	return echo(ns) + "/" + echo(name)
}

const (
	// maxEchoBytes bounds each string of a request (a kind, an
	// apiVersion, a name, a header) that a message repeats; any client
	// that reaches the port can send megabytes of invalid UTF-8.
	maxEchoBytes = 256
	// maxMessageBytes bounds a whole message, which may repeat several.
	maxMessageBytes = 2048
	// maxUIDBytes bounds request.uid, which the answer repeats whole.
	maxUIDBytes = 128
)

// echo is s cut to maxEchoBytes, valid UTF-8, marked when cut.
func echo(s string) string { return boundedtext.Cut(s, maxEchoBytes) }

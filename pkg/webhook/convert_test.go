package webhook

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/test/hostile"
)

func newHandler(t *testing.T) *ConvertHandler {
	t.Helper()
	return &ConvertHandler{Log: zap.NewNop(), Metrics: NewMetrics(prometheus.NewRegistry()), MaxRequestBytes: 1 << 20}
}

func post(t *testing.T, h http.Handler, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	return rec
}

func reviewBody(desired string, objects ...string) string {
	return `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u-1","desiredAPIVersion":"` +
		desired + `","objects":[` + strings.Join(objects, ",") + `]}}`
}

const alphaObject = `{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize","metadata":{"name":"mz","namespace":"ns"},
  "spec":{"environmentdImageRef":"mz:v1","backendSecretName":"b","environmentdIamRoleArn":"arn:x"}}`

func decodeResponse(t *testing.T, rec *httptest.ResponseRecorder) *apiextensionsv1.ConversionResponse {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("response is not a ConversionReview: %v: %s", err, rec.Body)
	}
	if out.Response == nil || out.Response.UID != "u-1" {
		t.Fatalf("response must echo the request uid: %s", rec.Body)
	}
	return out.Response
}

func TestConvertsEveryObject(t *testing.T) {
	h := newHandler(t)
	resp := decodeResponse(t, post(t, h, reviewBody("materialize.cloud/v1", alphaObject, alphaObject)))
	if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 2 {
		t.Fatalf("want 2 converted objects and Success, got %+v", resp.Result)
	}
	var obj map[string]any
	if err := json.Unmarshal(resp.ConvertedObjects[0].Raw, &obj); err != nil {
		t.Fatal(err)
	}
	if obj["apiVersion"] != "materialize.cloud/v1" {
		t.Errorf("not converted: %s", resp.ConvertedObjects[0].Raw)
	}
	if got := testutil.ToFloat64(h.Metrics.conversions.WithLabelValues("success", "materialize.cloud/v1alpha1", "materialize.cloud/v1")); got != 2 {
		t.Errorf("conversions_total{success} = %v, want 2", got)
	}
}

func TestFailuresAreConversionReviewFailures(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"unknown desired version": {reviewBody("materialize.cloud/v7", alphaObject), `desired apiVersion: "materialize.cloud/v7"`},
		"wrong kind":              {reviewBody("materialize.cloud/v1", `{"apiVersion":"materialize.cloud/v1alpha1","kind":"Console"}`), `objects[0] (): kind "Console"`},
		"object not JSON object":  {reviewBody("materialize.cloud/v1", alphaObject, `[1,2]`), "objects[1]: not a JSON object"},
		"one bad object fails all": {reviewBody("materialize.cloud/v1", alphaObject, `{"apiVersion":"x/v1","kind":"Materialize","metadata":{"name":"b","namespace":"n"}}`),
			`objects[1] (n/b): object apiVersion: "x/v1"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := decodeResponse(t, post(t, newHandler(t), tc.body))
			if resp.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Result.Message, tc.want) {
				t.Errorf("want Failure mentioning %q, got %+v", tc.want, resp.Result)
			}
			if len(resp.ConvertedObjects) != 0 {
				t.Errorf("a failed review must carry no objects")
			}
		})
	}
}

func TestMalformedRequestsAre4xx(t *testing.T) {
	h := newHandler(t)
	cases := map[string]struct {
		method, contentType, body string
		status                    int
		want                      string
	}{
		"not JSON":       {http.MethodPost, "application/json", "{nope", http.StatusBadRequest, "not a ConversionReview"},
		"wrong type":     {http.MethodPost, "application/json", `{"apiVersion":"v1","kind":"Pod"}`, http.StatusBadRequest, "want apiextensions.k8s.io/v1 ConversionReview"},
		"v1beta1 review": {http.MethodPost, "application/json", `{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","request":{}}`, http.StatusBadRequest, "want apiextensions.k8s.io/v1"},
		"no request":     {http.MethodPost, "application/json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, http.StatusBadRequest, "has no request"},
		"uid not a string": {http.MethodPost, "application/json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":7}}`,
			http.StatusBadRequest, "request.uid: must be a string"},
		"objects not a list": {http.MethodPost, "application/json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","objects":{}}}`,
			http.StatusBadRequest, "request.objects: must be a list"},
		"truncated":     {http.MethodPost, "application/json", reviewBody("materialize.cloud/v1", alphaObject)[:100], http.StatusBadRequest, "unexpected end of JSON input"},
		"trailing data": {http.MethodPost, "application/json", reviewBody("materialize.cloud/v1", alphaObject) + "{}", http.StatusBadRequest, "data after the top-level value"},
		"GET":           {http.MethodGet, "", "", http.StatusMethodNotAllowed, "only POST"},
		"yaml":          {http.MethodPost, "application/yaml", "{}", http.StatusUnsupportedMediaType, "want application/json"},
		"oversize body": {http.MethodPost, "application/json", `{"x":"` + strings.Repeat("a", 2<<20) + `"}`, http.StatusRequestEntityTooLarge, "larger than"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(tc.method, "/convert", strings.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("want %d mentioning %q, got %d: %s", tc.status, tc.want, rec.Code, rec.Body)
			}
		})
	}
	if got := testutil.ToFloat64(h.Metrics.inFlight); got != 0 {
		t.Errorf("in-flight gauge leaked: %v", got)
	}
}

func TestEmptyUIDIsAFailure(t *testing.T) {
	body := strings.Replace(reviewBody("materialize.cloud/v1", alphaObject), `"uid":"u-1"`, `"uid":""`, 1)
	rec := post(t, newHandler(t), body)
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("bad response %d: %s", rec.Code, rec.Body)
	}
	if out.Response.Result.Status != metav1.StatusFailure || !strings.Contains(out.Response.Result.Message, "uid") {
		t.Errorf("want a Failure naming the uid, got %+v", out.Response.Result)
	}
}

// Labels come from a closed set: an apiVersion chosen by whoever reaches
// the port must not create a series. Before, the failure counter was
// labelled with the request's apiVersions as sent.
func TestMetricLabelsAreAClosedSet(t *testing.T) {
	h := newHandler(t)
	for i := range 3 {
		obj := strings.Replace(alphaObject, "materialize.cloud/v1alpha1", fmt.Sprintf("evil.example/v%d", i), 1)
		resp := decodeResponse(t, post(t, h, reviewBody(fmt.Sprintf("attacker/v%d", i), obj)))
		if resp.Result.Status != metav1.StatusFailure {
			t.Fatalf("converting to attacker/v%d succeeded", i)
		}
	}
	if n := testutil.CollectAndCount(h.Metrics.conversions); n != 1 {
		t.Errorf("%d series after 3 requests with distinct apiVersions, want 1", n)
	}
	if got := testutil.ToFloat64(h.Metrics.conversions.WithLabelValues("failure", "other", "other")); got != 3 {
		t.Errorf(`conversions_total{result="failure",from="other",to="other"} = %v, want 3`, got)
	}
}

// Reviews beyond the in-flight budget (memory or count) are answered 429
// with Retry-After, which the API server's webhook client retries; one that
// would cost more than the whole budget is refused with 413 and says why.
func TestInFlightBudget(t *testing.T) {
	h := newHandler(t)
	body := reviewBody("materialize.cloud/v1", alphaObject)
	cost, _ := reviewCost(body)
	// Room for what reviews leave for connections, the request, its body
	// buffer (its declared length and one byte) and one review, no more.
	h.MaxInFlightMemory = connectionReserve + requestMemory + cost + int64(len(body)) + 1
	h.MaxInFlightReviews = 2
	decodeResponse(t, post(t, h, body))

	// A byte charged besides: the review no longer fits.
	if !h.budget.charge(1, h.MaxInFlightMemory) {
		t.Fatal("an idle budget refused a byte")
	}
	rec := post(t, h, body)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("beyond the memory budget: %d, Retry-After %q; want 429 and 1", rec.Code, rec.Header().Get("Retry-After"))
	}
	h.budget.refund(1)

	h.MaxInFlightMemory = 1 << 30
	for range 2 {
		if !h.budget.admitReview(1, h.MaxInFlightMemory, 2) {
			t.Fatal("a review within both budgets was refused")
		}
	}
	if rec := post(t, h, body); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("a third review beyond MaxInFlightReviews=2: %d, want 429", rec.Code)
	}
	h.budget.releaseReview(1)
	h.budget.releaseReview(1)
	decodeResponse(t, post(t, h, body))

	h.MaxInFlightMemory = connectionReserve + requestMemory + cost // the body buffer does not fit besides
	rec = post(t, h, body)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "more than the webhook's in-flight memory allows a review") {
		t.Fatalf("a review costing more than the budget: %d %q, want 413 saying why", rec.Code, rec.Body)
	}
	if h.budget.memory != 0 || h.budget.reviews != 0 {
		t.Errorf("after every review: %d bytes and %d reviews still charged", h.budget.memory, h.budget.reviews)
	}
	if got := testutil.CollectAndCount(h.Metrics.latency); got != 3 { // success, throttled, bad_request
		t.Errorf("latency series = %d, want success, throttled and bad_request", got)
	}
}

// A body is charged as its bytes arrive: a client that declares a large
// Content-Length and sends nothing holds no memory, and a body is refused
// once what it has sent outgrows the budget.
func TestBodiesAreChargedAsTheyArrive(t *testing.T) {
	h := newHandler(t)
	h.MaxRequestBytes = 16 << 20
	h.MaxInFlightMemory = 4 << 20
	body, stalled := io.Pipe()
	defer stalled.Close()
	req := httptest.NewRequest(http.MethodPost, "/convert", body)
	req.ContentLength = 12 << 20
	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		done <- rec.Code
	}()
	if _, err := stalled.Write([]byte(`{"apiVersion":`)); err != nil {
		t.Fatal(err)
	}
	h.budget.mu.Lock()
	held := h.budget.memory
	h.budget.mu.Unlock()
	if held > requestMemory+bodyChunk {
		t.Errorf("a body that declared 12 MiB and sent 14 bytes holds %d bytes of the budget beyond the request's own", held-requestMemory)
	}
	decodeResponse(t, post(t, h, reviewBody("materialize.cloud/v1", alphaObject)))

	// 5 MiB more than the budget allows: refused while it arrives.
	go func() {
		chunk := strings.Repeat(" ", 1<<20)
		for range 5 {
			if _, err := io.WriteString(stalled, chunk); err != nil {
				return
			}
		}
	}()
	if code := <-done; code != http.StatusTooManyRequests {
		t.Errorf("a body outgrowing the budget: %d, want 429", code)
	}
	if h.budget.memory != 0 {
		t.Errorf("%d bytes still charged after the refusal", h.budget.memory)
	}
}

// readCounter counts the bytes read from it.
type readCounter struct {
	r io.Reader
	n int
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// A review whose declared body could not be admitted with what the budget
// has free now is answered 429 before a byte of it is read: the API server
// retries it, and would otherwise send all of it each time. One that could
// never be admitted is still read, to be answered 413 with its cost.
func TestBodyThatCannotFitNowIsRefusedUnread(t *testing.T) {
	h := newHandler(t)
	body := reviewBody("materialize.cloud/v1", alphaObject)
	cost, _ := reviewCost(body)
	h.MaxInFlightMemory = connectionReserve + requestMemory + cost + int64(len(body)) + 1
	send := func() (*httptest.ResponseRecorder, int) {
		counted := &readCounter{r: strings.NewReader(body)}
		req := httptest.NewRequest(http.MethodPost, "/convert", counted)
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = int64(len(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec, counted.n
	}
	taken := h.MaxInFlightMemory - connectionReserve - requestMemory - leastChargeFor(int64(len(body))) + 1
	if !h.budget.charge(taken, h.MaxInFlightMemory) {
		t.Fatal("an idle budget refused the charge")
	}
	if rec, read := send(); rec.Code != http.StatusTooManyRequests || read != 0 {
		t.Errorf("with %d bytes free, less than the least a review of %d bytes is charged: %d after reading %d bytes, want 429 unread",
			leastChargeFor(int64(len(body)))-1, len(body), rec.Code, read)
	}
	// Refused for what it is before the budget is consulted.
	req := httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body))
	req.Header.Set("Content-Type", "text/plain")
	rec := httptest.NewRecorder()
	if h.ServeHTTP(rec, req); rec.Code != http.StatusUnsupportedMediaType {
		t.Errorf("a text/plain body with the budget taken: %d, want 415", rec.Code)
	}
	h.budget.refund(taken)
	if rec, _ := send(); rec.Code != http.StatusOK {
		t.Errorf("with the budget free again: %d, want 200", rec.Code)
	}

	h.MaxInFlightMemory = connectionReserve + requestMemory + leastChargeFor(int64(len(body))) - 1
	if rec, read := send(); rec.Code != http.StatusRequestEntityTooLarge || read != len(body) {
		t.Errorf("a review that could never be admitted: %d after reading %d of %d bytes, want 413 read", rec.Code, read, len(body))
	}
	if h.budget.memory != 0 {
		t.Errorf("%d bytes still charged", h.budget.memory)
	}
}

// A client that sends headers and then trickles its body (or stops) is
// answered 408 at BodyReadTimeout while the rest of its body never comes,
// over HTTP/2 as the API server speaks it and over HTTP/1.1, where the
// connection is then closed (Go's server would otherwise read the rest of
// the body, however slowly it came, before answering). Reviews are answered
// meanwhile.
func TestTricklingBodyIsAnswered408AtTheReadDeadline(t *testing.T) {
	h := newHandler(t)
	h.BodyReadTimeout = 500 * time.Millisecond
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	send := func() int {
		resp, err := client.Post(srv.URL+"/convert", "application/json", strings.NewReader(reviewBody("materialize.cloud/v1", alphaObject)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	t.Run("HTTP/2", func(t *testing.T) {
		body, stalled := io.Pipe()
		defer stalled.Close()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/convert", body)
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = 1000
		slow := make(chan *http.Response, 1)
		go func() {
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				close(slow)
				return
			}
			slow <- resp
		}()
		if _, err := stalled.Write([]byte(`{"apiVersion":`)); err != nil { // then nothing more
			t.Fatal(err)
		}
		if code := send(); code != http.StatusOK {
			t.Errorf("beside a trickling body: %d, want 200", code)
		}
		resp, ok := <-slow
		if !ok {
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || resp.ProtoMajor != 2 {
			t.Errorf("the trickling request was answered %d over HTTP/%d, want 408 over HTTP/2", resp.StatusCode, resp.ProtoMajor)
		}
	})

	t.Run("HTTP/1.1", func(t *testing.T) {
		conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{RootCAs: rootCAs(srv), NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60\r\n\r\n{")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer while the body is incomplete: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
			t.Errorf("answered %d, close %v; want 408 and the connection closed", resp.StatusCode, resp.Close)
		}
		if n, err := conn.Read(make([]byte, 1)); err == nil {
			t.Errorf("the connection is still open after the 408 (read %d bytes)", n)
		}
		if code := send(); code != http.StatusOK {
			t.Errorf("after the trickling request: %d, want 200", code)
		}
	})
}

// A body that keeps arriving at MinBodyRate or faster is read to its end
// however long past BodyReadTimeout it takes: a replica slowed by its own
// load once answered a steady 12 MiB review 408. One that arrives more
// slowly is still answered 408, soon after BodyReadTimeout, and so is one
// that stops after a burst: what arrived buys time only while more comes.
func TestSteadyBodyOutlivesTheGraceATrickleDoesNot(t *testing.T) {
	h := newHandler(t)
	h.BodyReadTimeout, h.MinBodyRate = 300*time.Millisecond, 200
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	// send writes chunk bytes of body every 50 ms, at most chunks of them
	// (0: all), until the answer comes, and returns the answer.
	send := func(body string, declared int64, chunk, chunks int) (code int, took time.Duration) {
		pipe, w := io.Pipe()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/convert", pipe)
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = declared
		answered := make(chan struct{})
		go func() {
			defer w.Close()
			sent := 0
			for rest := body; rest != ""; rest = rest[min(chunk, len(rest)):] {
				select {
				case <-answered:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if chunks > 0 && sent == chunks {
					<-answered // stalled
					return
				}
				if _, err := w.Write([]byte(rest[:min(chunk, len(rest))])); err != nil {
					return
				}
				sent++
			}
		}()
		start := time.Now()
		resp, err := srv.Client().Do(req)
		close(answered)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}

	// About a second at 2 000 bytes/s, ten times MinBodyRate: well past
	// the grace.
	steady := strings.Repeat(" ", 1500) + reviewBody("materialize.cloud/v1", alphaObject)
	if code, took := send(steady, int64(len(steady)), 100, 0); code != http.StatusOK {
		t.Errorf("%d bytes at 2 000 bytes/s: answered %d after %v, want 200", len(steady), code, took)
	}
	// 100 bytes/s, half MinBodyRate, of a body that would take 100 s:
	// cut once the grace and what arrived are spent (about 0.6 s).
	if code, took := send(strings.Repeat(" ", 10000), 10000, 5, 0); code != http.StatusRequestTimeout || took > 5*time.Second {
		t.Errorf("a trickle at 100 bytes/s: answered %d after %v, want 408 within 5 s", code, took)
	}
	// 2 000 bytes at once, worth 10 s at MinBodyRate, then nothing: cut
	// the grace after the last byte.
	if code, took := send(strings.Repeat(" ", 10000), 10000, 2000, 1); code != http.StatusRequestTimeout || took > 5*time.Second {
		t.Errorf("a burst and then nothing: answered %d after %v, want 408 within 5 s", code, took)
	}
}

// Over HTTP/1, a deadline that fires as a body's last byte comes fails Go's
// read of the next request, which cancels the connection's context: the
// review, whole, is still answered, and the connection closed.
func TestDeadlineFiringAfterTheLastByteFailsNoReview(t *testing.T) {
	h := newHandler(t)
	h.BodyReadTimeout = 50 * time.Millisecond
	h.afterBodyRead = func() { time.Sleep(300 * time.Millisecond) }
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/convert", "application/json", strings.NewReader(reviewBody("materialize.cloud/v1", alphaObject)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), `"status":"Success"`) {
		t.Errorf("answered %d: %s; want 200 and a success", resp.StatusCode, answer)
	}
	if !resp.Close {
		t.Error("the connection, whose context is cancelled, is kept open")
	}
}

func rootCAs(srv *httptest.Server) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return pool
}

// A label value that shared the request's memory would keep the whole body
// alive as long as its series exists.
func TestVersionLabelsDoNotShareTheRequest(t *testing.T) {
	body := []byte("materialize.cloud/v1alpha1 materialize.cloud/v1")
	for _, in := range []string{string(body[:26]), string(body[27:])} {
		got := versionLabel(in)
		if got != in {
			t.Fatalf("versionLabel(%q) = %q", in, got)
		}
		if unsafe.StringData(got) == unsafe.StringData(in) {
			t.Errorf("versionLabel(%q) returned the request's own string", in)
		}
	}
}

// A body's buffer grows fourfold when its length was declared, and never
// past the request limit and one byte, however the body arrives.
func TestBodyBufferGrowth(t *testing.T) {
	const limit = 1 << 20
	for _, tc := range []struct {
		name            string
		size, declared  int64
		maxGrowths      int
		maxBufferLength int64
	}{
		{"a LIST page, its length declared", 640 << 10, 640 << 10, 3, 640<<10 + 1},
		{"the limit, no length declared", limit, -1, 6, limit + 1},
	} {
		growths, most := 0, int64(0)
		charge := func(n int64) bool { growths++; most = max(most, n); return true }
		body := strings.NewReader(strings.Repeat("x", int(tc.size)))
		b, _, err := readCharged(http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(body), limit), tc.declared, limit, charge, func(int64) {})
		if err != nil || int64(len(b)) != tc.size {
			t.Fatalf("%s: read %d bytes, %v", tc.name, len(b), err)
		}
		if growths > tc.maxGrowths || most > tc.maxBufferLength {
			t.Errorf("%s: %d growths, largest buffer %d bytes; want at most %d and %d", tc.name, growths, most, tc.maxGrowths, tc.maxBufferLength)
		}
	}
}

// Carry annotations can make a response outgrow its share of the review's
// charge (up to 16 KiB for each small object): the rest is charged as the
// response grows. A review that then finds no room is answered 429 while
// other reviews hold it, 413 when it would not fit in the whole budget,
// and leaves nothing charged.
func TestResponseOutgrowingItsChargeIsCharged(t *testing.T) {
	body := hostile.Reviews(512 << 10)["carried-role"]
	cost, _ := reviewCost(body)
	h := newHandler(t)
	h.MaxInFlightMemory = 1 << 30
	if rec := post(t, h, body); rec.Code != http.StatusOK || !strings.HasSuffix(rec.Body.String(), `"status":"Success"}}}`) {
		t.Fatalf("within the budget: answered %d, %d bytes", rec.Code, rec.Body.Len())
	}
	admitted := connectionReserve + requestMemory + cost + int64(len(body)) + 1
	needed := connectionReserve + h.budget.peak
	if needed <= admitted {
		t.Fatalf("peak charge %d: the carries were not charged beyond the %d admitted", needed, admitted)
	}
	// The answer's memory stays charged while it is written.
	var whileWritten int64
	w := &chargeProbe{tailWriter: tailWriter{header: http.Header{}}, budget: &h.budget, seen: &whileWritten}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))
	if connectionReserve+whileWritten <= admitted {
		t.Errorf("while the answer was written %d bytes were charged: what it took beyond the %d admitted was refunded before", whileWritten, admitted-connectionReserve)
	}

	// Room for the review as admitted, not for its carries.
	h.MaxInFlightMemory = admitted + 64<<10
	rec := post(t, h, body)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "outgrow the webhook's in-flight memory") {
		t.Fatalf("beyond the whole budget: answered %d %.300q; want 413 saying why", rec.Code, rec.Body)
	}

	// Room for all of it, held in part by another review.
	h.MaxInFlightMemory = needed
	if !h.budget.charge(needed-admitted, h.MaxInFlightMemory) {
		t.Fatal("the budget refused the other review's share")
	}
	rec = post(t, h, body)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("beyond what is left: answered %d %.300q; want 429 with Retry-After", rec.Code, rec.Body)
	}
	h.budget.refund(needed - admitted)
	if h.budget.memory != 0 || h.budget.reviews != 0 {
		t.Errorf("after the reviews: %d bytes and %d reviews still charged", h.budget.memory, h.budget.reviews)
	}
}

// chargeProbe records the most the budget holds while an answer is written.
type chargeProbe struct {
	tailWriter
	budget *budget
	seen   *int64
}

func (w *chargeProbe) Write(p []byte) (int, error) {
	w.budget.mu.Lock()
	*w.seen = max(*w.seen, w.budget.memory)
	w.budget.mu.Unlock()
	return w.tailWriter.Write(p)
}

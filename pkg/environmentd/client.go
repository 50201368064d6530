// Package environmentd is a small HTTP client for environmentd's leader API,
// which the materialize reconciler uses to roll out environmentd generations:
// it polls GET /api/leader/status until a new generation is ReadyToPromote,
// promotes it with POST /api/leader/promote (after POST
// /api/leader/skip-catchup when the promotion is forced) and waits for
// IsLeader. With Password, Sasl or Oidc authentication the leader API sits behind
// a login, as mz_system, on environmentd's external HTTP port.
package environmentd

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"strings"
	"time"

	"github.com/materializeinc/orchestratord/pkg/tracing"
)

// Paths of the leader API, relative to an environmentd base URL.
const (
	StatusPath      = "/api/leader/status"
	PromotePath     = "/api/leader/promote"
	SkipCatchupPath = "/api/leader/skip-catchup"
	LoginPath       = "/api/login"
	// SystemUser is the internal role the operator logs in as.
	SystemUser = "mz_system"
)

// DefaultTimeout bounds each request made by a Client whose HTTP is nil:
// upstream orchestratord's 10 s. environmentd answers a login only once its
// adapter is up, which can take seconds after its pod is Ready.
const DefaultTimeout = 10 * time.Second

// MaxBodyBytes is the largest response body a Client reads.
const MaxBodyBytes = 1 << 20

// maxErrorBody is how much of a response body an error message quotes.
const maxErrorBody = 256

// LeaderStatus is a value of the "status" field returned by
// GET /api/leader/status.
type LeaderStatus string

// The leader statuses environmentd reports, in rollout order. environmentd
// reports its catch-up as Initializing; CatchingUp is accepted as a synonym.
const (
	Initializing   LeaderStatus = "Initializing"
	CatchingUp     LeaderStatus = "CatchingUp"
	ReadyToPromote LeaderStatus = "ReadyToPromote"
	Promoting      LeaderStatus = "Promoting"
	IsLeader       LeaderStatus = "IsLeader"
)

// Valid reports whether s is one of the known leader statuses.
func (s LeaderStatus) Valid() bool {
	switch s {
	case Initializing, CatchingUp, ReadyToPromote, Promoting, IsLeader:
		return true
	}
	return false
}

// URL returns the in-cluster base URL of a Service's port:
// {scheme}://{serviceName}.{namespace}.svc.cluster.local:{port}.
func URL(scheme, serviceName, namespace string, port int) string {
	return scheme + "://" + serviceName + "." + namespace + ".svc.cluster.local:" + strconv.Itoa(port)
}

// StatusError is returned when environmentd answers with a non-2xx status.
type StatusError struct {
	Method string
	URL    string
	Code   int
	Body   string // truncated to about 256 bytes
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("environmentd %s %s: HTTP %d", e.Method, e.URL, e.Code)
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

var defaultHTTPClient = &http.Client{Timeout: DefaultTimeout, CheckRedirect: refuseRedirect}

// refuseRedirect keeps every call at the environmentd it was made to. The
// image is the tenant's: a redirect would make the operator, which every
// environment's NetworkPolicy admits, call another environment's leader
// API (a promotion, a skipped catch-up), or send the login elsewhere. A
// redirect is answered as the status it is (StatusError).
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Client calls environmentd's leader API. The zero value is ready to use.
type Client struct {
	// HTTP makes the requests; nil means a client with DefaultTimeout.
	HTTP *http.Client
	// Wrap, when set, wraps every call's transport: the controllers pass
	// the lease fence, so no promotion leaves after the lease could have
	// expired.
	Wrap func(http.RoundTripper) http.RoundTripper
	// Password, when set, is mz_system's: every call first logs in at
	// LoginPath and sends the session cookie, as upstream does. Over https
	// the certificate is then not verified either, as upstream does: it is
	// issued for the environment's clients, not for the operator. (Only
	// when HTTP's transport is an *http.Transport, which it is unless a
	// test sets another.)
	Password string
}

// WithPassword returns a copy of c that logs in as mz_system.
func (c *Client) WithPassword(password string) *Client {
	cp := *c
	cp.Password = password
	return &cp
}

// Timed returns a copy of c that adds to *spent how long each of its calls
// takes, to the end of its answer (or its failure). Its calls must not run
// concurrently: one reconcile's are made one after another.
func (c *Client) Timed(spent *time.Duration) *Client {
	cp := *c
	inner := c.Wrap
	cp.Wrap = func(rt http.RoundTripper) http.RoundTripper {
		if inner != nil {
			rt = inner(rt)
		}
		return timedTransport{next: rt, spent: spent}
	}
	return &cp
}

// timedTransport adds each round trip's time, its body read included, to
// spent.
type timedTransport struct {
	next  http.RoundTripper
	spent *time.Duration
}

func (t timedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		*t.spent += time.Since(start)
		return resp, err
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, start: start, spent: t.spent}
	return resp, nil
}

type timedBody struct {
	io.ReadCloser
	start  time.Time
	spent  *time.Duration
	closed bool
}

func (b *timedBody) Close() error {
	if !b.closed {
		b.closed = true
		*b.spent += time.Since(b.start)
	}
	return b.ReadCloser.Close()
}

// SkipCatchup tells the environmentd at baseURL to stop waiting for its
// clusters to catch up (a forced promotion). environmentd answers 400 with
// {"message": ...} when it cannot.
func (c *Client) SkipCatchup(ctx context.Context, baseURL string) error {
	_, err := c.do(ctx, http.MethodPost, baseURL, SkipCatchupPath)
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusBadRequest {
		var resp struct {
			Message string `json:"message"`
		}
		if json.Unmarshal([]byte(se.Body), &resp) == nil && resp.Message != "" {
			return fmt.Errorf("failed to skip catchup: %s", resp.Message)
		}
	}
	return err
}

// Status returns the leader status reported by the environmentd at baseURL
// (e.g. the result of URL("http", service, namespace, 6878)).
func (c *Client) Status(ctx context.Context, baseURL string) (LeaderStatus, error) {
	body, err := c.do(ctx, http.MethodGet, baseURL, StatusPath)
	if err != nil {
		return "", err
	}
	var resp struct {
		Status *string `json:"status"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return "", fmt.Errorf("environmentd leader status: decoding response %q: %w", truncate(body), err)
	}
	if resp.Status == nil {
		return "", fmt.Errorf("environmentd leader status: response %q has no status", truncate(body))
	}
	s := LeaderStatus(*resp.Status)
	if !s.Valid() {
		return "", fmt.Errorf("environmentd leader status: unknown status %q", *resp.Status)
	}
	return s, nil
}

// Promote asks the environmentd at baseURL to become the leader. It succeeds
// only on a 2xx response whose body is {"result":"Success"}.
func (c *Client) Promote(ctx context.Context, baseURL string) error {
	body, err := c.do(ctx, http.MethodPost, baseURL, PromotePath)
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusBadRequest {
		// environmentd refuses a promotion before it is ready with
		// {"result":{"Failure":{"message":...}}}.
		var resp struct {
			Result struct {
				Failure struct {
					Message string `json:"message"`
				} `json:"Failure"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(se.Body), &resp) == nil && resp.Result.Failure.Message != "" {
			return fmt.Errorf("environmentd refused the promotion: %s", resp.Result.Failure.Message)
		}
	}
	if err != nil {
		return err
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || !bytes.Equal(bytes.TrimSpace(resp.Result), []byte(`"Success"`)) {
		return fmt.Errorf("environmentd leader promote: unsuccessful response %q", truncate(body))
	}
	return nil
}

// client is the HTTP client of one call: with a password, a copy with its
// own cookie jar for the session; wrapped by Wrap; while tracing is on,
// each request a child span of the caller's (the reconcile's).
func (c *Client) client() *http.Client {
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTPClient
	}
	if c.Password == "" && c.Wrap == nil && !tracing.Enabled() && hc == defaultHTTPClient {
		return hc
	}
	cp := *hc
	cp.CheckRedirect = refuseRedirect
	base := cp.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if c.Password != "" {
		cp.Jar, _ = cookiejar.New(nil) // never fails without options
		if t, ok := base.(*http.Transport); ok {
			t = t.Clone()
			if t.TLSClientConfig == nil {
				t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			}
			t.TLSClientConfig.InsecureSkipVerify = true //nolint:gosec // upstream's behaviour; see Password
			t.DisableKeepAlives = true                  // a transport per call must not keep connections
			base = t
		}
	}
	if c.Wrap != nil {
		base = c.Wrap(base)
	}
	// Outermost, so a request the fence refuses is in the trace too.
	cp.Transport = tracing.Transport(base, route)
	return &cp
}

func (c *Client) login(ctx context.Context, hc *http.Client, baseURL string) error {
	url := strings.TrimRight(baseURL, "/") + LoginPath
	body, _ := json.Marshal(map[string]string{"username": SystemUser, "password": c.Password})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("environmentd login %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("environmentd login %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxBodyBytes))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{Method: http.MethodPost, URL: url, Code: resp.StatusCode, Body: "login as " + SystemUser + " failed"}
	}
	return nil
}

func (c *Client) do(ctx context.Context, method, baseURL, path string) ([]byte, error) {
	url := strings.TrimRight(baseURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, fmt.Errorf("environmentd %s %s: %w", method, url, err)
	}
	req.Header.Set("Accept", "application/json")
	hc := c.client()
	if c.Password != "" {
		if err := c.login(ctx, hc, baseURL); err != nil {
			return nil, err
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("environmentd %s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("environmentd %s %s: reading response: %w", method, url, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &StatusError{Method: method, URL: url, Code: resp.StatusCode, Body: string(truncate(body))}
	}
	if len(body) > MaxBodyBytes {
		return nil, fmt.Errorf("environmentd %s %s: response body exceeds %d bytes", method, url, MaxBodyBytes)
	}
	return body, nil
}

// route is the leader API path a request is for, without the base URL's
// own path (--environmentd-url-template may put the generation's name
// there): span names stay as few as the API's paths.
func route(req *http.Request) string {
	for _, p := range []string{StatusPath, PromotePath, SkipCatchupPath, LoginPath} {
		if strings.HasSuffix(req.URL.Path, p) {
			return p
		}
	}
	return req.URL.Path
}

// truncate shortens b for inclusion in an error message.
func truncate(b []byte) []byte {
	if len(b) <= maxErrorBody {
		return b
	}
	return append(b[:maxErrorBody:maxErrorBody], "..."...)
}

// IsStatusError reports whether err is (or wraps) a StatusError with the given
// HTTP status code.
func IsStatusError(err error, code int) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == code
}

// Package otlp is an in-process OpenTelemetry collector for tests: it
// receives trace exports over OTLP/HTTP (protobuf) or OTLP/gRPC, decodes
// them with the collector's own generated types, and hands back the spans.
package otlp

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, flattened for assertions.
type Span struct {
	Name                          string
	TraceID, SpanID, ParentSpanID string
	Kind                          tracepb.Span_SpanKind
	Attributes                    map[string]string
	Resource                      map[string]string
	Scope                         string
	StatusCode                    tracepb.Status_StatusCode
	StatusMessage                 string
}

// Receiver collects the exports sent to it.
type Receiver struct {
	// URL is what --opentelemetry-endpoint takes.
	URL string

	mu      sync.Mutex
	spans   []Span
	headers []http.Header
	// Fail, when set, answers an export with its status (HTTP) or code
	// (gRPC) instead of taking it, while it returns non-zero.
	fail func() int
}

// FailWith makes the receiver refuse exports while f returns non-zero: an
// HTTP status, or a gRPC code.
func (r *Receiver) FailWith(f func() int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = f
}

func (r *Receiver) failure() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail == nil {
		return 0
	}
	return r.fail()
}

func (r *Receiver) add(req *coltracepb.ExportTraceServiceRequest, h http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.headers = append(r.headers, h)
	for _, rs := range req.GetResourceSpans() {
		res := attributes(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{
					Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Kind: s.GetKind(),
					Attributes: attributes(s.GetAttributes()), Resource: res, Scope: ss.GetScope().GetName(),
					StatusCode: s.GetStatus().GetCode(), StatusMessage: s.GetStatus().GetMessage(),
				})
			}
		}
	}
}

func attributes(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetBoolValue())
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

// Spans are the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Headers are the request headers (gRPC: metadata) of each export taken.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// WaitFor waits until a span matching match has arrived, and returns it.
func (r *Receiver) WaitFor(t testing.TB, what string, match func(Span) bool) Span {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, s := range r.Spans() {
			if match(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %s among %d received: %+v", what, len(r.Spans()), r.Spans())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// NewHTTP is a receiver of OTLP/HTTP with protobuf bodies, at URL +
// /v1/traces, until the test ends.
func NewHTTP(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces of application/x-protobuf", http.StatusBadRequest)
			return
		}
		if code := r.failure(); code != 0 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "refused", code)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		msg := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(body, msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(msg, req.Header.Clone())
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// NewGRPC is a receiver of OTLP/gRPC, a grpc-go server in the clear (an
// http:// endpoint), until the test ends.
func NewGRPC(t testing.TB) *Receiver {
	r := &Receiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, &grpcService{r: r})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	r.URL = "http://" + ln.Addr().String()
	return r
}

type grpcService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s *grpcService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if code := s.r.failure(); code != 0 {
		return nil, status.Error(codes.Code(code), "refused")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	h := http.Header{}
	for k, vs := range md {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	s.r.add(req, h)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

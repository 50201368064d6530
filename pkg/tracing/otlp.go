package tracing

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Protocols of --opentelemetry-protocol.
const (
	// ProtocolGRPC is OTLP/gRPC, what upstream's exporter speaks to
	// --opentelemetry-endpoint.
	ProtocolGRPC = "grpc"
	// ProtocolHTTP is OTLP/HTTP with protobuf bodies.
	ProtocolHTTP = "http/protobuf"
)

// exportMethod is the gRPC method of OTLP/gRPC trace export.
const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// client exports spans to an OTLP collector over net/http: one unary
// OTLP/gRPC call (HTTP/2, also cleartext) or one OTLP/HTTP POST per batch.
// The official exporters import gRPC, whose dependencies (html/template
// among them) keep every exported method in the executable: 22 MB more
// for the webhook, whose Go memory limit is its container's less its
// executable. The request is encoded here, so not even the collector's
// generated service package (which imports gRPC) is linked.
type client struct {
	url string
	// shown is url without its user and password, for messages.
	shown   string
	grpc    bool
	headers http.Header
	http    *http.Client
}

// newClient is the client for endpoint (with its scheme, as upstream
// requires: http:// is cleartext, https:// TLS with the system's roots).
func newClient(endpoint, protocol string, headers http.Header) (*client, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		// url.Error quotes the URL, password and all.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("--opentelemetry-endpoint: not a URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--opentelemetry-endpoint: %q is not an http:// or https:// URL", withoutUser(u))
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	c := &client{headers: headers, http: &http.Client{Transport: transport}}
	switch protocol {
	case ProtocolGRPC:
		// gRPC is HTTP/2 only: over TLS by ALPN, in the clear with prior
		// knowledge (h2c), as a gRPC client does for an http:// target.
		var p http.Protocols
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
		transport.Protocols = &p
		c.grpc = true
		c.url = strings.TrimSuffix(u.String(), "/") + exportMethod
	case ProtocolHTTP:
		// As OTEL_EXPORTER_OTLP_ENDPOINT: a base URL gets the signal's path.
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		c.url = u.String()
	default:
		return nil, fmt.Errorf("--opentelemetry-protocol: %q is neither %s nor %s", protocol, ProtocolGRPC, ProtocolHTTP)
	}
	c.shown = redacted(c.url)
	return c, nil
}

func (c *client) Start(context.Context) error { return nil }

func (c *client) Stop(context.Context) error {
	c.http.CloseIdleConnections()
	return nil
}

// UploadTraces sends one ExportTraceServiceRequest, retrying what the
// OTLP specification calls transient failures with backoff until ctx (the
// export timeout) ends.
func (c *client) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := marshalRequest(spans, c.grpc)
	if err != nil {
		return err
	}
	backoff := firstBackoff
	for {
		retryAfter, err := c.send(ctx, body)
		if err == nil || retryAfter < 0 {
			return err
		}
		wait := max(retryAfter, backoff)
		backoff = min(2*backoff, 30*time.Second)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return err
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
	}
}

// firstBackoff is the wait before the first retry; it doubles up to 30 s.
var firstBackoff = time.Second

// marshalRequest encodes an ExportTraceServiceRequest (field 1: repeated
// ResourceSpans), in a gRPC message frame when grpc: an uncompressed flag
// and the length.
func marshalRequest(spans []*tracepb.ResourceSpans, grpc bool) ([]byte, error) {
	frame := 0
	if grpc {
		frame = 5
	}
	size := frame
	for _, rs := range spans {
		n := proto.Size(rs)
		size += protowire.SizeTag(1) + protowire.SizeBytes(n)
	}
	b := make([]byte, frame, size)
	for _, rs := range spans {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(proto.Size(rs)))
		var err error
		if b, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(b, rs); err != nil {
			return nil, err
		}
	}
	if grpc {
		binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-frame))
	}
	return b, nil
}

// maxResponse bounds the response read: a status or a partial success.
const maxResponse = 64 << 10

// send makes one export call. retryAfter is negative when a failure is not
// worth retrying, else the least wait before the next try.
func (c *client) send(ctx context.Context, body []byte) (retryAfter time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	for k, v := range c.headers {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "orchestratord")
	if c.grpc {
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
	} else {
		req.Header.Set("Content-Type", "application/x-protobuf")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The collector may be restarting: retried.
		return 0, fmt.Errorf("exporting spans to %s: %w", c.shown, err)
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return 0, fmt.Errorf("exporting spans to %s: reading the response: %w", c.shown, err)
	}
	if c.grpc {
		return c.grpcResult(resp, msg)
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		return -1, partialSuccess(msg)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusBadGateway ||
		resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
		return retryAfterHeader(resp.Header), fmt.Errorf("exporting spans to %s: %s", c.shown, resp.Status)
	}
	return -1, fmt.Errorf("exporting spans to %s: %s", c.shown, resp.Status)
}

// grpcResult reads a unary call's outcome: grpc-status in the trailers,
// or in the headers of a response without a body.
func (c *client) grpcResult(resp *http.Response, msg []byte) (time.Duration, error) {
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("exporting spans to %s: %s (is it an OTLP/gRPC endpoint? --opentelemetry-protocol)", c.shown, resp.Status)
		if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusGatewayTimeout {
			return 0, err
		}
		return -1, err
	}
	status, message := resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	if status == "" {
		status, message = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	code, err := strconv.Atoi(status)
	if err != nil {
		return -1, fmt.Errorf("exporting spans to %s: no grpc-status in the response", c.shown)
	}
	if code == 0 {
		if len(msg) < 5 {
			return -1, nil
		}
		return -1, partialSuccess(msg[5:])
	}
	if m, err := url.PathUnescape(message); err == nil {
		message = m
	}
	err = fmt.Errorf("exporting spans to %s: gRPC status %d: %s", c.shown, code, message)
	switch code {
	// The codes the OTLP specification retries: CANCELLED,
	// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, OUT_OF_RANGE,
	// UNAVAILABLE, DATA_LOSS.
	case 1, 4, 8, 10, 11, 14, 15:
		return 0, err
	}
	return -1, err
}

// partialSuccess reports the spans an ExportTraceServiceResponse says
// were rejected (field 1, ExportTracePartialSuccess: rejected_spans = 1,
// error_message = 2). They are not retried, as the specification says.
func partialSuccess(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			inner, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil
			}
			var rejected uint64
			var message string
			for len(inner) > 0 {
				num, typ, m := protowire.ConsumeTag(inner)
				if m < 0 {
					break
				}
				inner = inner[m:]
				switch {
				case num == 1 && typ == protowire.VarintType:
					rejected, m = protowire.ConsumeVarint(inner)
				case num == 2 && typ == protowire.BytesType:
					var s []byte
					s, m = protowire.ConsumeBytes(inner)
					message = string(s)
				default:
					m = protowire.ConsumeFieldValue(num, typ, inner)
				}
				if m < 0 {
					break
				}
				inner = inner[m:]
			}
			if rejected > 0 || message != "" {
				return fmt.Errorf("the collector rejected %d spans: %s", rejected, message)
			}
			return nil
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil
		}
		b = b[n:]
	}
	return nil
}

// retryAfterHeader is a Retry-After in seconds, else no least wait.
func retryAfterHeader(h http.Header) time.Duration {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

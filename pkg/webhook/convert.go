// Package webhook serves the Materialize CRD conversion webhook: the
// ConversionReview handler, health endpoints, metrics and graceful shutdown.
package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/materializeinc/orchestratord/pkg/conversion"
)

// DefaultMaxRequestBytes bounds a ConversionReview body. A LIST converts
// every object in one review, so this is far above a single object's size.
const DefaultMaxRequestBytes = 64 << 20

// ConvertHandler answers ConversionReview v1 requests.
type ConvertHandler struct {
	Log             *zap.Logger
	Metrics         *Metrics
	MaxRequestBytes int64
}

type reviewError struct {
	status int
	msg    string
}

func (h *ConvertHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h.Metrics.inFlight.Inc()
	defer h.Metrics.inFlight.Dec()

	review, rerr := h.readReview(w, r)
	if rerr != nil {
		h.Log.Info("rejected conversion request", zap.Int("status", rerr.status), zap.String("reason", rerr.msg))
		h.Metrics.latency.WithLabelValues("bad_request").Observe(time.Since(start).Seconds())
		http.Error(w, rerr.msg, rerr.status)
		return
	}
	h.Metrics.objects.Observe(float64(len(review.Request.Objects)))
	resp := h.convert(review.Request)
	result := "success"
	if resp.Result.Status != metav1.StatusSuccess {
		result = "failure"
		h.Log.Info("conversion failed", zap.String("uid", string(resp.UID)),
			zap.String("desiredAPIVersion", review.Request.DesiredAPIVersion), zap.String("reason", resp.Result.Message))
	}
	out, err := json.Marshal(&apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil {
		h.Log.Error("encoding ConversionReview response", zap.Error(err))
		http.Error(w, "encoding response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
	h.Metrics.latency.WithLabelValues(result).Observe(time.Since(start).Seconds())
}

func (h *ConvertHandler) readReview(w http.ResponseWriter, r *http.Request) (*apiextensionsv1.ConversionReview, *reviewError) {
	if r.Method != http.MethodPost {
		return nil, &reviewError{http.StatusMethodNotAllowed, "only POST is allowed"}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, &reviewError{http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q: want application/json", ct)}
		}
	}
	limit := h.MaxRequestBytes
	if limit <= 0 {
		limit = DefaultMaxRequestBytes
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &reviewError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", limit)}
		}
		return nil, &reviewError{http.StatusBadRequest, "reading body: " + err.Error()}
	}
	review := &apiextensionsv1.ConversionReview{}
	if err := json.Unmarshal(body, review); err != nil {
		return nil, &reviewError{http.StatusBadRequest, "body is not a ConversionReview: " + err.Error()}
	}
	if review.APIVersion != apiextensionsv1.SchemeGroupVersion.String() || review.Kind != "ConversionReview" {
		return nil, &reviewError{http.StatusBadRequest, fmt.Sprintf("want apiextensions.k8s.io/v1 ConversionReview, got %s %s", review.APIVersion, review.Kind)}
	}
	if review.Request == nil {
		return nil, &reviewError{http.StatusBadRequest, "ConversionReview has no request"}
	}
	return review, nil
}

// convert converts every object or none: one failure fails the review, as
// the API server requires.
func (h *ConvertHandler) convert(req *apiextensionsv1.ConversionRequest) (resp *apiextensionsv1.ConversionResponse) {
	resp = &apiextensionsv1.ConversionResponse{UID: req.UID}
	fail := func(format string, args ...any) *apiextensionsv1.ConversionResponse {
		resp.ConvertedObjects = nil
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf(format, args...)}
		return resp
	}
	defer func() {
		// A bug must cost one request, never the process or a hung connection.
		if p := recover(); p != nil {
			h.Log.Error("panic converting objects", zap.Any("panic", p), zap.String("uid", string(req.UID)))
			resp = fail("internal error converting objects")
		}
	}()
	if req.UID == "" {
		return fail("request.uid is empty")
	}
	resp.ConvertedObjects = make([]runtime.RawExtension, 0, len(req.Objects))
	for i, raw := range req.Objects {
		obj, err := decodeObject(raw.Raw)
		if err != nil {
			h.Metrics.conversions.WithLabelValues("failure", "", req.DesiredAPIVersion).Inc()
			return fail("objects[%d]: %v", i, err)
		}
		from, _ := obj["apiVersion"].(string)
		converted, err := conversion.Convert(obj, req.DesiredAPIVersion)
		if err != nil {
			h.Metrics.conversions.WithLabelValues("failure", from, req.DesiredAPIVersion).Inc()
			return fail("objects[%d] (%s): %v", i, objectName(obj), err)
		}
		encoded, err := json.Marshal(converted)
		if err != nil {
			return fail("objects[%d] (%s): encoding: %v", i, objectName(obj), err)
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: encoded})
		h.Metrics.conversions.WithLabelValues("success", from, req.DesiredAPIVersion).Inc()
	}
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}

func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if obj == nil {
		return nil, errors.New("not a JSON object: null")
	}
	if dec.More() {
		return nil, errors.New("trailing data after the object")
	}
	return obj, nil
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

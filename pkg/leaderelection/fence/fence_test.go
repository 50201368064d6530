package fence

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestTransportRefusesLateWritesOnly(t *testing.T) {
	var served int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served++ }))
	defer srv.Close()
	client := &http.Client{Transport: Transport(http.DefaultTransport)}
	deadline := time.Now().Add(-time.Millisecond) // already past
	late := WithWriteDeadline(context.Background(), func() time.Time { return deadline })
	fresh := WithWriteDeadline(context.Background(), func() time.Time { return time.Now().Add(time.Hour) })

	do := func(ctx context.Context, method string) error {
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := do(late, http.MethodPatch); !errors.Is(err, ErrFenced) {
		t.Errorf("a write past the deadline must be fenced, got %v", err)
	}
	if err := do(late, http.MethodGet); err != nil {
		t.Errorf("reads are not fenced: %v", err)
	}
	if err := do(fresh, http.MethodPost); err != nil {
		t.Errorf("a write within the deadline must pass: %v", err)
	}
	if err := do(context.Background(), http.MethodDelete); err != nil {
		t.Errorf("a write outside any lead context (e.g. the lease renewal) must pass: %v", err)
	}
	if served != 3 {
		t.Errorf("served %d requests, want 3", served)
	}
}

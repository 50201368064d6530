package fence

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/materializeinc/orchestratord/pkg/environmentd"
)

// The controllers call environmentd with the lease fence (Client.Wrap): a
// promotion attempted after the lease could have expired never leaves the
// process, while reads still do.
func TestFenceStopsPromotionsPastTheDeadline(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			_, _ = w.Write([]byte(`{"result":"Success"}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"ReadyToPromote"}`))
	}))
	t.Cleanup(srv.Close)
	client := &environmentd.Client{Wrap: Transport}

	live := WithWriteDeadline(context.Background(), func() time.Time { return time.Now().Add(time.Hour) })
	if err := client.Promote(live, srv.URL); err != nil || posts.Load() != 1 {
		t.Fatalf("promote within the deadline: err %v, %d POSTs", err, posts.Load())
	}
	expired := WithWriteDeadline(context.Background(), func() time.Time { return time.Now().Add(-time.Millisecond) })
	for _, call := range []func(context.Context, string) error{client.Promote, client.SkipCatchup} {
		if err := call(expired, srv.URL); !errors.Is(err, ErrFenced) {
			t.Errorf("a write past the deadline: err = %v, want ErrFenced", err)
		}
	}
	// With a password the login is a POST too: fenced as well.
	if _, err := client.WithPassword("x").Status(expired, srv.URL); !errors.Is(err, ErrFenced) {
		t.Errorf("login past the deadline: err = %v, want ErrFenced", err)
	}
	if posts.Load() != 1 {
		t.Errorf("%d POSTs reached environmentd, want 1", posts.Load())
	}
	if _, err := client.Status(expired, srv.URL); err != nil {
		t.Errorf("a read past the deadline: %v", err)
	}
}

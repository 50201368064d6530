package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/pkg/leaderelection/fence"
)

// A fence aborts a promotion still on the wire, as it aborts the API
// server's writes: the materialize controller calls environmentd over its
// own connections. On a shared keep-alive pool the promotion went on until
// its 10 s timeout, past the point where the Lease could have expired.
func TestAFenceAbortsAPromotionOnTheWire(t *testing.T) {
	arrived := make(chan struct{})
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done() // environmentd still promoting when the fence comes
		close(gone)
	}))
	defer srv.Close()

	clients, err := newLeaseClients(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"}, "materialize", "pod", leaderelection.NewTerms(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer clients.stopEvents()
	leading := fence.WithWriteDeadline(context.Background(), func() time.Time { return time.Now().Add(time.Hour) })
	promoted := make(chan error, 1)
	go func() { promoted <- clients.environmentd().Promote(leading, srv.URL) }()

	const bound = 30 * time.Second // a hang guard, not a measurement
	select {
	case <-arrived:
	case <-time.After(bound):
		t.Fatal("the promotion never reached environmentd")
	}
	clients.abort(zap.NewNop(), "materialize")
	select {
	case err := <-promoted:
		var netErr net.Error
		if err == nil || (errors.As(err, &netErr) && netErr.Timeout()) {
			t.Errorf("promotion after the fence: err = %v, want the connection aborted (not a timeout)", err)
		}
	case <-time.After(bound):
		t.Fatal("the promotion did not return")
	}
	select {
	case <-gone:
	case <-time.After(bound):
		t.Fatal("environmentd never saw the connection go")
	}
}

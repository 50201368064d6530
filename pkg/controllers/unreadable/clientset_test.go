package unreadable

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	mzfake "github.com/materializeinc/orchestratord/pkg/client/clientset/versioned/fake"
)

// A LIST page through the wrapped clientset: the query the informer asked
// for reaches the API server (limit, continue, resourceVersion), the page's
// continue token and resourceVersion come back, every item is in it (one
// that does not read as a placeholder), and a 410 for an expired continue
// token is the error client-go's reflector relists on.
func TestListPagesAsClientGoDoes(t *testing.T) {
	var query, accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query, accept = r.URL.RawQuery, r.Header.Get("Accept")
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("continue") == "expired" {
			w.WriteHeader(http.StatusGone)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"continue token expired"}`))
			return
		}
		_, _ = w.Write([]byte(`{"apiVersion":"materialize.cloud/v1alpha1","kind":"MaterializeList","metadata":{"resourceVersion":"42","continue":"next"},"items":[` +
			materialize("", `"1"`, "", "") + "," + materialize("", `"1e1.5"`, "", "") + `]}`))
	}))
	t.Cleanup(srv.Close)
	c, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	materializes := Clientset(c).MaterializeV1alpha1().Materializes("")
	list, err := materializes.List(context.Background(), metav1.ListOptions{Limit: 500, ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if query != "limit=500&resourceVersion=0" || accept != "application/json" {
		t.Errorf("query %q, Accept %q", query, accept)
	}
	if list.ResourceVersion != "42" || list.Continue != "next" || len(list.Items) != 2 {
		t.Fatalf("list meta %+v with %d items", list.ListMeta, len(list.Items))
	}
	if _, marked := Reason(&list.Items[0]); marked {
		t.Error("the item that reads is a placeholder")
	}
	if _, marked := Reason(&list.Items[1]); !marked {
		t.Error("the item that does not read is not a placeholder")
	}
	if _, err := materializes.List(context.Background(), metav1.ListOptions{Limit: 500, Continue: "expired"}); !apierrors.IsResourceExpired(err) {
		t.Errorf("an expired continue token: err %v, want 410 Expired", err)
	}
}

// wrapped is a clientset wrapped by someone else, as a program may.
type wrapped struct{ versioned.Interface }

// Every client that reaches an API server is read object by object,
// however it is wrapped; a fake clientset, which has no REST client and
// holds typed objects already, is left as it is.
func TestClientsetWrapsEveryRealClient(t *testing.T) {
	real, err := versioned.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]versioned.Interface{"real": real, "wrapped": wrapped{real}} {
		if _, ok := Clientset(c).(clientset); !ok {
			t.Errorf("%s: not read object by object", name)
		}
	}
	fake := mzfake.NewClientset()
	if Clientset(fake) != versioned.Interface(fake) {
		t.Error("a fake clientset was wrapped")
	}
}

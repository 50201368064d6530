package recent

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Writes the informers never confirm are not kept for ever: however many
// objects are written, what is remembered is the writes of the last
// writeTTL, and an expired one is not used.
func TestWritesAreBounded(t *testing.T) {
	r := NewWrites()
	now := time.Unix(0, 0)
	r.now = func() time.Time { return now }
	obj := func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i), ResourceVersion: "5"}}
	}
	for i := range 1000 {
		r.Put(fmt.Sprintf("ns/owner-%d", i%100), fmt.Sprintf("ConfigMap/%d", i), obj(i))
	}
	if _, ok := r.get("ns/owner-1", "ConfigMap/1"); !ok {
		t.Fatal("a fresh write is not remembered")
	}
	now = now.Add(writeTTL + time.Second)
	if _, ok := r.get("ns/owner-1", "ConfigMap/1"); ok {
		t.Error("an expired write is still used")
	}
	// A day of writes, one a second, each never confirmed.
	for i := range 24 * 3600 {
		now = now.Add(time.Second)
		r.Put("ns/owner", fmt.Sprintf("ConfigMap/%d", i), obj(i))
	}
	if n, most := r.Len(), int(writeTTL/time.Second)*3/2+1; n > most {
		t.Errorf("%d writes remembered after a day, want at most %d (a TTL and a half)", n, most)
	}
}

package materialize

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/mzuuid"
)

// The environmentId index finds exactly the Materializes the pre-flight
// check used to find by comparing every one with mzuuid.Equal: two ids
// share a key if and only if Equal says they are the same, and unset ids
// are not indexed.
func TestEnvironmentIDIndexKeysAsEqualCompares(t *testing.T) {
	const canonical = "0b0b0b0b-1111-4222-8333-444444444444"
	ids := []string{
		canonical,
		"0B0B0B0B-1111-4222-8333-444444444444",
		"0b0b0b0b111142228333444444444444",
		"{0b0b0b0b-1111-4222-8333-444444444444}",
		"urn:uuid:0b0b0b0b-1111-4222-8333-444444444444",
		"0b0b0b0b-11114222-8333-444444444444", // not a UUID: compared as written
		"0b0b0b0b-1111-4222-8333-444444444445",
		"not-a-uuid",
	}
	for _, a := range ids {
		for _, b := range ids {
			if same, equal := environmentIDKey(a) == environmentIDKey(b), mzuuid.Equal(a, b); same != equal {
				t.Errorf("%q and %q: same key %v, mzuuid.Equal %v", a, b, same, equal)
			}
		}
	}

	for _, unset := range []string{"", mzuuid.Nil} {
		keys, err := indexByEnvironmentID(&v1alpha1.Materialize{Spec: v1alpha1.MaterializeSpec{EnvironmentID: unset}})
		if err != nil || len(keys) != 0 {
			t.Errorf("environmentId %q indexed as %v (%v), want not indexed", unset, keys, err)
		}
	}
	keys, err := indexByEnvironmentID(&v1alpha1.Materialize{ObjectMeta: metav1.ObjectMeta{Name: "mz"}, Spec: v1alpha1.MaterializeSpec{EnvironmentID: "0B0B0B0B-1111-4222-8333-444444444444"}})
	if err != nil || len(keys) != 1 || keys[0] != canonical {
		t.Errorf("indexed as %v (%v), want [%s]", keys, err, canonical)
	}
}

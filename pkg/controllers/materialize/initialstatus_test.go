package materialize

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
)

// The annotation resumes after a generation number; one past 2^53 - 1 is
// refused as not one: the next generation would wrap to 0 past 2^64 - 1,
// and status.activeGeneration must read back in JSON readers that hold
// numbers as float64.
func TestLastKnownActiveGenerationIsBounded(t *testing.T) {
	for value, want := range map[string]struct {
		gen uint64
		bad bool
	}{
		"7":                    {gen: 7},
		"9007199254740991":     {gen: 1<<53 - 1},
		"9007199254740992":     {bad: true},
		"18446744073709551615": {bad: true},
		"-1":                   {bad: true},
		"seven":                {bad: true},
	} {
		mz := &v1alpha1.Materialize{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{LastKnownActiveGenerationAnnotation: value}}}
		status, bad := initialStatus(mz)
		if bad != want.bad || (!bad && status.ActiveGeneration != want.gen) {
			t.Errorf("%s: activeGeneration %d, refused %v; want %d, refused %v", value, status.ActiveGeneration, bad, want.gen, want.bad)
		}
	}
}

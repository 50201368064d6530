package materialize

import (
	"strings"
	"testing"
)

func TestPodLabelsProblem(t *testing.T) {
	for _, c := range []struct {
		labels map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{"team": "a", "example.com/owner": "b", "app.kubernetes.io/component": "sql"}, ""},
		// Not in the domain: only a suffix of it.
		{map[string]string{"notmaterialize.cloud/x": "y"}, ""},
		{map[string]string{"materialize.cloud/mz-resource-id": "u1"}, `"materialize.cloud/mz-resource-id" is in the materialize.cloud domain`},
		{map[string]string{"cluster.environmentd.materialize.cloud/generation": "1"}, `"cluster.environmentd.materialize.cloud/generation" is in the`},
		{map[string]string{"a/b/c": "x"}, `spec.podLabels: "a/b/c" is not a label key`},
		{map[string]string{"team": strings.Repeat("v", 64)}, `the value of "team" is not a label value: must be no more than 63`},
		{map[string]string{strings.Repeat("k", 5000): "x"}, "is not a label key"},
	} {
		got := podLabelsProblem(c.labels)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("podLabelsProblem(%.80v) = %q, want %q", c.labels, got, c.want)
		}
		if len(got) > 2*maxNameShown+200 {
			t.Errorf("the problem is %d bytes: a key must be cut", len(got))
		}
	}
}

package apply

import "testing"

func TestSubset(t *testing.T) {
	got := map[string]any{"a": 1.0, "b": map[string]any{"c": "x", "d": []any{1.0, 2.0}}, "e": true}
	cases := []struct {
		want any
		ok   bool
	}{
		{map[string]any{}, true},
		{map[string]any{"a": 1.0}, true},
		{map[string]any{"b": map[string]any{"c": "x"}}, true},
		{map[string]any{"b": map[string]any{"d": []any{1.0, 2.0}}}, true},
		{map[string]any{"b": map[string]any{"d": []any{1.0}}}, false},
		{map[string]any{"a": 2.0}, false},
		{map[string]any{"z": nil}, false},
		{map[string]any{"b": "x"}, false},
	}
	for i, tc := range cases {
		if Subset(tc.want, got) != tc.ok {
			t.Errorf("case %d: Subset(%v) = %v, want %v", i, tc.want, !tc.ok, tc.ok)
		}
	}
}

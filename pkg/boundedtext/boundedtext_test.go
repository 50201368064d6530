package boundedtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 20, "short"},
		{"exactly ten", 11, "exactly ten"},
		{strings.Repeat("a", 30), 20, strings.Repeat("a", 20-len(Marker)) + Marker},
		// A cut never splits a rune.
		{strings.Repeat("é", 20), 20, strings.Repeat("é", 6) + Marker},
		// Invalid UTF-8 is replaced, whether or not it is cut.
		{"a\xffb", 20, "a\uFFFDb"},
		{"x", 1, "x"},
	} {
		got := Cut(tc.in, tc.n)
		if got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if !utf8.ValidString(got) || len(got) > max(tc.n, len(Marker)) {
			t.Errorf("Cut(%q, %d) = %q: invalid or over the bound", tc.in, tc.n, got)
		}
	}
	// A huge invalid input costs no more than a few times the bound.
	huge := strings.Repeat("\xff", 4<<20)
	if got := Cut(huge, 64); len(got) > 64 || !strings.HasSuffix(got, Marker) {
		t.Errorf("huge input: %q", got)
	}
}

package jsonvalue

import (
	"encoding/json"
	"strings"
	"testing"
)

// withByteAt is a string of n plain bytes with b at p: every byte at every
// place in a word, and past the last whole word.
func withByteAt(n, p int, b byte) string {
	s := []byte(strings.Repeat("abcdefgh", n/8+1)[:n])
	s[p] = b
	return string(s)
}

func isPlain(b byte) bool { return b >= 0x20 && b < 0x80 && b != '"' && b != '\\' }

func isPlainHTML(b byte) bool { return isPlain(b) && b != '<' && b != '>' && b != '&' }

// The skips stop at the first byte that needs care in a whole word, and
// only there.
func TestSkipPlainStopsAtTheFirstByteThatNeedsCare(t *testing.T) {
	for _, skip := range []struct {
		name  string
		skip  func(string, int) int
		plain func(byte) bool
	}{{"SkipPlain", SkipPlain, isPlain}, {"skipPlainHTML", skipPlainHTML, isPlainHTML}} {
		for _, n := range []int{7, 8, 20, 24} {
			for p := range n {
				for c := range 256 {
					s := withByteAt(n, p, byte(c))
					for from := range min(p+1, 3) {
						j := skip.skip(s, from)
						want := n - (n-from)%8 // where the bytes too few for a word begin
						if !skip.plain(byte(c)) && p < want {
							want = p
						}
						if j != want {
							t.Fatalf("%s(%q, %d) = %d, want %d", skip.name, s, from, j, want)
						}
					}
				}
			}
		}
	}
}

// Two bytes that need care in one word: the skip stops at the first,
// whatever the borrow of either does to the masks.
func TestSkipPlainSeesEitherOfTwo(t *testing.T) {
	special := []byte{0, 0x1f, '"', '\\', 0x7f, 0x80, 0xff, '<', ' '}
	for p := range 8 {
		for q := range 8 {
			for _, a := range special {
				for _, b := range special {
					s := []byte(withByteAt(16, p, a))
					s[q] = b
					want := 16
					for i, c := range s {
						if !isPlain(c) {
							want = i
							break
						}
					}
					if j := SkipPlain(string(s), 0); j != want {
						t.Fatalf("SkipPlain(%q, 0) = %d, want %d", s, j, want)
					}
				}
			}
		}
	}
}

// Long strings with any byte anywhere decode and encode as encoding/json
// does, and the estimate charges them as it charges bytes it scans one by
// one.
func TestLongStringsMatchEncodingJSON(t *testing.T) {
	for p := range 20 {
		for c := range 256 {
			s := withByteAt(20, p, byte(c))
			checkDecode(t, []byte(`"`+s+`"`))
			want, _ := json.Marshal(s)
			if got := AppendString(nil, s); string(got) != string(want) {
				t.Fatalf("AppendString(%q) = %s; json.Marshal gives %s", s, got, want)
			}
			if c == '"' || (c == '\\' && p == len(s)-1) {
				continue // the string ends early, or not at all
			}
			charged := int64(boxedStringBytes)
			if c >= 0x80 || c == '\\' {
				charged += unquoteFactor * int64(len(s))
			}
			if got, _, _ := Estimate(`"`+s+`"`, 0); got != charged {
				t.Fatalf("Estimate(%q) = %d, want %d", s, got, charged)
			}
		}
		// Input that ends in a string, or in its escape.
		if got, _, _ := Estimate(`"`+withByteAt(p+1, p, '\\'), 0); got != boxedStringBytes+unquoteFactor*int64(p+1) {
			t.Fatalf("Estimate of a string cut after its backslash at %d = %d", p, got)
		}
		checkDecode(t, []byte(`"`+withByteAt(p+1, p, 'x')))
		for _, r := range []string{"\u2028", "\u00e9", "\U0001F600"} {
			s := withByteAt(20, p, 'x')[:p] + r + withByteAt(20, p, 'x')[p+1:]
			want, _ := json.Marshal(s)
			if got := AppendString(nil, s); string(got) != string(want) {
				t.Fatalf("AppendString(%q) = %s; json.Marshal gives %s", s, got, want)
			}
			checkDecode(t, []byte(`"`+s+`"`))
		}
	}
}

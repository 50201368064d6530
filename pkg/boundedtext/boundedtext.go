// Package boundedtext cuts text that came from outside (a tenant's object,
// a pod's status, a request) to a bound before it reaches a log line, a
// status message or a response: valid UTF-8, and marked when cut, so a
// reader knows it is not the whole.
package boundedtext

import (
	"strings"
	"unicode/utf8"
)

// Marker ends a cut text.
const Marker = "…(cut)"

// Cut returns s as valid UTF-8 (invalid bytes become U+FFFD) of at most n
// bytes, ending in Marker when something was cut. n below Marker's length
// is raised to it.
func Cut(s string, n int) string {
	n = max(n, len(Marker))
	if len(s) <= n && utf8.ValidString(s) {
		return s
	}
	// Only a prefix is read, so a huge input costs no more than a small one.
	cut := len(s) > 4*n
	s = strings.ToValidUTF8(s[:min(len(s), 4*n)], "\uFFFD")
	if !cut && len(s) <= n {
		return s
	}
	end := min(len(s), n-len(Marker))
	for end > 0 && end < len(s) && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + Marker
}

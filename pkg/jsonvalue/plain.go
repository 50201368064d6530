package jsonvalue

import "math/bits"

// Most of a Kubernetes object's text is strings of plain ASCII: names,
// image references, UUIDs, timestamps. The scans below skip such bytes
// eight at a time, so the per-byte loops of the decoder, the estimate, the
// encoder and conversion's serde writer see only the bytes that need care
// and a string's last few.

const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// word is the eight bytes of s from i, the first in the lowest byte; the
// compiler makes it one load.
func word(s string, i int) uint64 {
	b := s[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// The lowest byte of w below n (n <= 0x80), or equal to b, has its high bit
// set in these masks, and no byte before it does, as long as the bytes
// before it are ASCII (a byte outside ASCII is flagged by w&highBits
// itself); bytes after it may be flagged by a borrow, which is why only the
// lowest flagged byte counts.
func anyBelow(w, n uint64) uint64 { return (w - lowBits*n) & ^w & highBits }

func anyEqual(w uint64, b byte) uint64 {
	x := w ^ lowBits*uint64(b)
	return (x - lowBits) & ^x & highBits
}

// SkipPlain returns the index of the first byte of s from i on that a
// JSON string's reader or writer must look at (a quote, a backslash, a
// control character, or a byte outside ASCII), looking at whole words
// only: when there is none in them, it returns where the last len(s)-i mod
// 8 bytes begin, which the caller scans byte by byte.
func SkipPlain(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		w := word(s, i)
		if m := w&highBits | anyBelow(w, 0x20) | anyEqual(w, '"') | anyEqual(w, '\\'); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	return i
}

// skipPlainHTML is SkipPlain that also stops at '<', '>' and '&', which
// the encoder escapes as encoding/json does.
func skipPlainHTML(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		w := word(s, i)
		if m := w&highBits | anyBelow(w, 0x20) | anyEqual(w, '"') | anyEqual(w, '\\') |
			anyEqual(w, '<') | anyEqual(w, '>') | anyEqual(w, '&'); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	return i
}

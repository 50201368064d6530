// Package mzuuid reads and writes UUID fields of the Materialize API as
// upstream orchestratord does: its Rust types hold them as uuid::Uuid, which
// parses every spelling the uuid crate accepts (hyphenated, simple, braced,
// URN; any case) and writes the lower-case hyphenated form. Two spellings of
// one UUID are one value, and environmentd refuses anything but the
// canonical form in its --environment-id.
package mzuuid

import (
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// Nil is the nil UUID as upstream writes it.
const Nil = "00000000-0000-0000-0000-000000000000"

// Canonical returns s as upstream writes it once parsed, or an error naming
// s when upstream cannot parse it.
func Canonical(s string) (string, error) {
	if isCanonical(s) {
		return s, nil // as u.String() would write it, without allocating
	}
	// google/uuid accepts the same four spellings as the uuid crate.
	u, err := uuid.Parse(s)
	if err != nil || !wellFormed(s) {
		return "", fmt.Errorf("%q is not a UUID", s)
	}
	return u.String(), nil
}

// isCanonical reports whether s is a UUID in the hyphenated lower-case form
// uuid.UUID.String writes.
func isCanonical(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// Valid reports whether upstream parses s as a UUID, without writing it.
func Valid(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && wellFormed(s)
}

// wellFormed refuses what google/uuid accepts but the uuid crate does not:
// a URN prefix in another case ("URN:UUID:"), and any pair of characters
// around the 36-character form but braces.
func wellFormed(s string) bool {
	switch len(s) {
	case 45:
		return strings.HasPrefix(s, "urn:uuid:")
	case 38:
		return s[0] == '{' && s[37] == '}'
	}
	return true
}

// Value is a UUID field as upstream's typed reader holds it: "" (absent,
// serde's default) is the nil UUID, any other spelling its canonical form.
// A value that does not parse comes back as it is, the caller's to refuse.
func Value(s string) string {
	if s == "" {
		return Nil
	}
	if c, err := Canonical(s); err == nil {
		return c
	}
	return s
}

// IsSet reports whether s names a UUID other than the nil one; "" is unset,
// as upstream's serde default (the nil UUID). A value that does not parse
// is set: it is the caller's to refuse.
func IsSet(s string) bool {
	if s == "" {
		return false
	}
	c, err := Canonical(s)
	return err != nil || c != Nil
}

// Equal reports whether a and b are one UUID; values that do not parse are
// equal only as strings.
func Equal(a, b string) bool {
	ca, errA := Canonical(a)
	cb, errB := Canonical(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return ca == cb
}

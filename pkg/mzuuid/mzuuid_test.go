package mzuuid

import "testing"

func TestCanonicalAcceptsTheUUIDCratesSpellings(t *testing.T) {
	const want = "0b0b0b0b-1111-4222-8333-444444444444"
	for _, in := range []string{
		want,
		"0B0B0B0B-1111-4222-8333-444444444444",
		"0b0b0b0b111142228333444444444444",
		"{0b0b0b0b-1111-4222-8333-444444444444}",
		"urn:uuid:0b0b0b0b-1111-4222-8333-444444444444",
	} {
		got, err := Canonical(in)
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	// The API server's uuid format admits hyphens in some places only;
	// the uuid crate does not.
	for _, in := range []string{"", "0b0b0b0b-11114222-8333-444444444444", "0b0b0b0b-1111-4222-8333-44444444444g",
		"URN:UUID:0b0b0b0b-1111-4222-8333-444444444444", "0b0b0b0b-1111-4222-8333-4444444444444",
		"[0b0b0b0b-1111-4222-8333-444444444444]", "(0b0b0b0b-1111-4222-8333-444444444444)", "{0b0b0b0b-1111-4222-8333-444444444444)"} {
		if got, err := Canonical(in); err == nil {
			t.Errorf("Canonical(%q) = %q, want an error", in, got)
		}
	}
}

func TestIsSetAndEqual(t *testing.T) {
	for in, want := range map[string]bool{"": false, Nil: false, "00000000000000000000000000000000": false,
		"0b0b0b0b111142228333444444444444": true, "garbage": true} {
		if got := IsSet(in); got != want {
			t.Errorf("IsSet(%q) = %v, want %v", in, got, want)
		}
	}
	if !Equal("0B0B0B0B111142228333444444444444", "0b0b0b0b-1111-4222-8333-444444444444") {
		t.Error("two spellings of one UUID differ")
	}
	if Equal("0b0b0b0b-1111-4222-8333-444444444444", "0b0b0b0b-1111-4222-8333-444444444445") || Equal("x", "y") || !Equal("x", "x") {
		t.Error("Equal is wrong on different or unparsable values")
	}
}

func TestValue(t *testing.T) {
	for in, want := range map[string]string{
		"":                                     Nil,
		"00000000000000000000000000000000":     Nil,
		"6F1F4A8E-3C2B-4E4F-9A7E-0C4B8D2E1F00": "6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00",
		"not-a-uuid":                           "not-a-uuid",
	} {
		if got := Value(in); got != want {
			t.Errorf("Value(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every conversion reads UUIDs already in the canonical form: they come
// back as they are, without a parse and a new string.
func TestCanonicalFormComesBackAsItIs(t *testing.T) {
	const in = "6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00"
	if got, err := Canonical(in); err != nil || got != in {
		t.Fatalf("Canonical(%q) = %q, %v", in, got, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Canonical(in) }); n != 0 {
		t.Errorf("Canonical of the canonical form allocates %v times", n)
	}
	// One upper-case digit or a misplaced hyphen is not the canonical form.
	for _, in := range []string{"6F1F4A8E-3C2B-4E4F-9A7E-0C4B8D2E1F00", "6f1f4a8e3-c2b-4e4f-9a7e-0c4b8d2e1f00"} {
		if isCanonical(in) {
			t.Errorf("%q taken for the canonical form", in)
		}
	}
}

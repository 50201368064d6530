package imageref

import "testing"

// Cases from upstream's parse_image_tag and matching-image tests
// (src/orchestratord/src/lib.rs).
func TestTag(t *testing.T) {
	for _, c := range []struct {
		ref, tag string
		ok       bool
	}{
		{"materialize/environmentd:v0.27.0", "v0.27.0", true},
		{"materialize/environmentd", "", false},
		{"gcr.io:443/materialize/environmentd:v0.27.0", "v0.27.0", true},
		{"gcr.io:443/materialize/environmentd", "", false},
		{"pkg.dev/proj/repo/env@sha256:deadbeef", "", false},
		{"pkg.dev/proj/repo/env:v1.0@sha256:deadbeef", "v1.0", true},
		{"environmentd:latest", "latest", true},
		{"environmentd", "", false},
	} {
		tag, ok := Tag(c.ref)
		if tag != c.tag || ok != c.ok {
			t.Errorf("Tag(%q) = %q, %v; want %q, %v", c.ref, tag, ok, c.tag, c.ok)
		}
	}
}

func TestSibling(t *testing.T) {
	for _, c := range []struct{ ref, name, tag, want string }{
		{"materialize/environmentd:v0.27.0", "console", "", "materialize/console:v0.27.0"},
		{"materialize/environmentd:v0.27.0", "console", "custom", "materialize/console:custom"},
		{"gcr.io:443/materialize/environmentd", "clusterd", "", "gcr.io:443/materialize/clusterd:latest"},
		{"pkg.dev/proj/repo/env@sha256:deadbeef", "console", "", "pkg.dev/proj/repo/console:latest"},
		{"environmentd", "console", "", "materialize/console:latest"},
	} {
		if got := Sibling(c.ref, c.name, c.tag); got != c.want {
			t.Errorf("Sibling(%q, %q, %q) = %q, want %q", c.ref, c.name, c.tag, got, c.want)
		}
	}
}

func TestEnvironmentdVersion(t *testing.T) {
	for _, c := range []struct {
		ref, want string
		ok        bool
	}{
		{"materialize/environmentd:v26.5.0", "26.5.0", true},
		{"materialize/environmentd:v26.32.0-dev.0--main.gabc", "26.32.0-dev.0+main.gabc", true},
		{"materialize/environmentd:v0.147.20", "0.147.20", true},
		{"materialize/environmentd:latest", "", false},
		{"materialize/environmentd:26.5.0", "", false},
		{"materialize/environmentd:v26.5", "", false},
		{"materialize/environmentd@sha256:0123", "", false},
		{"materialize/environmentd:v26.5.0@sha256:0123", "", false}, // upstream reads the digest as the tag
		{"registry:5000/environmentd", "", false},
	} {
		v, _, ok := EnvironmentdVersion(c.ref)
		if ok != c.ok || (ok && v.String() != c.want) {
			t.Errorf("EnvironmentdVersion(%q) = %v, %v; want %q, %v", c.ref, v, ok, c.want, c.ok)
		}
	}
}

func TestCompare(t *testing.T) {
	// Ascending by semver precedence (semver.org §11).
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
		"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "26.1.0-dev.0", "26.1.0", "26.32.0-dev.0", "26.32.0", "26.35.1"}
	for i := range order {
		for j := range order {
			a, b := MustParseVersion(order[i]), MustParseVersion(order[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", a, b, got, want)
			}
		}
	}
	if MustParseVersion("1.0.0+a").Compare(MustParseVersion("1.0.0+b")) != 0 {
		t.Error("build metadata must not affect precedence")
	}
	for _, bad := range []string{"1.0", "01.0.0", "1.0.0-", "1.0.0-01", "1.0.0+", "a.b.c", "1.0.0-a_b"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) succeeded", bad)
		}
	}
}

// upstream's is_valid_upgrade_version test cases (crd/materialize.rs).
func TestValidUpgrade(t *testing.T) {
	v := func(major, minor, patch uint64) Version { return Version{Major: major, Minor: minor, Patch: patch} }
	for _, c := range []struct {
		active, next Version
		ok           bool
	}{
		{v(0, 83, 0), v(0, 83, 0), true},
		{v(0, 83, 0), v(0, 84, 0), true},
		{v(0, 9, 0), v(0, 10, 0), true},
		{v(0, 99, 0), v(0, 100, 0), true},
		{v(0, 83, 0), v(0, 83, 1), true},
		{v(0, 83, 0), v(0, 83, 2), true},
		{v(0, 83, 2), v(0, 83, 10), true},
		{v(0, 147, 20), v(26, 0, 0), true},
		{v(0, 164, 0), v(26, 0, 0), true},
		{v(26, 0, 0), v(26, 1, 0), true},
		{v(26, 5, 3), v(26, 10, 0), true},
		{v(0, 130, 0), v(0, 147, 0), true},
		{v(26, 0, 0), v(27, 7, 3), true},
		{MustParseVersion("26.0.0"), MustParseVersion("27.7.8-dev.0"), true},
		{MustParseVersion("26.11.0-dev.0+b"), MustParseVersion("26.11.0-dev.0+a"), true},
		{v(0, 83, 0), v(0, 82, 0), false},
		{v(0, 83, 3), v(0, 83, 2), false},
		{v(0, 83, 3), v(1, 83, 3), false},
		{v(0, 83, 0), v(0, 85, 0), false},
		{v(26, 0, 0), v(28, 0, 0), false},
		{v(26, 0, 0), v(28, 0, 1), false},
		{v(0, 130, 0), v(26, 1, 0), false},
		{v(0, 147, 1), v(26, 0, 0), false},
		{v(0, 148, 0), v(26, 0, 0), false},
		{v(26, 5, 0), v(26, 4, 9), false},
	} {
		if got := ValidUpgrade(c.active, c.next); got != c.ok {
			t.Errorf("ValidUpgrade(%s, %s) = %v, want %v", c.active, c.next, got, c.ok)
		}
	}
}

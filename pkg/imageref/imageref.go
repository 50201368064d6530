// Package imageref reads what the operator needs from a container image
// reference: its tag, the environmentd version that tag names, and the
// sibling images (clusterd, balancerd, console) released with it. The rules
// are upstream orchestratord's, so the same reference means the same thing
// under either operator.
package imageref

import (
	"fmt"
	"strconv"
	"strings"
)

// Tag returns the tag of ref, ignoring a registry port and a digest:
// "gcr.io:443/materialize/environmentd:v26.5.0@sha256:…" has tag "v26.5.0";
// a digest-only reference has none.
func Tag(ref string) (string, bool) {
	beforeDigest, _, _ := strings.Cut(ref, "@")
	name := beforeDigest
	if i := strings.LastIndexByte(beforeDigest, '/'); i >= 0 {
		name = beforeDigest[i+1:]
	}
	i := strings.LastIndexByte(name, ':')
	if i < 0 {
		return "", false
	}
	return name[i+1:], true
}

// Sibling returns the image called name from the same registry and
// repository path as environmentdRef, with tag (or environmentdRef's tag,
// or "latest"): materialize/environmentd:v26.5.0 -> materialize/clusterd:v26.5.0.
func Sibling(environmentdRef, name, tag string) string {
	namespace := "materialize"
	if i := strings.LastIndexByte(environmentdRef, '/'); i >= 0 {
		namespace = environmentdRef[:i]
	}
	if tag == "" {
		tag, _ = Tag(environmentdRef)
	}
	if tag == "" {
		tag = "latest"
	}
	return namespace + "/" + name + ":" + tag
}

// Version is a semantic version (semver 2.0.0 precedence; build metadata is
// kept but never compared).
type Version struct {
	Major, Minor, Patch uint64
	Pre                 []string
	Build               string
}

// MustParseVersion parses a version known at compile time.
func MustParseVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// ParseVersion parses "MAJOR.MINOR.PATCH[-PRE][+BUILD]" strictly, as the
// semver crate upstream uses does.
func ParseVersion(s string) (Version, error) {
	var v Version
	rest, build, hasBuild := strings.Cut(s, "+")
	if hasBuild {
		if !validIdentifiers(build, false) {
			return v, fmt.Errorf("invalid build metadata in %q", s)
		}
		v.Build = build
	}
	core, pre, hasPre := strings.Cut(rest, "-")
	if hasPre {
		if !validIdentifiers(pre, true) {
			return v, fmt.Errorf("invalid pre-release in %q", s)
		}
		v.Pre = strings.Split(pre, ".")
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return v, fmt.Errorf("%q is not MAJOR.MINOR.PATCH", s)
	}
	nums := make([]uint64, 3)
	for i, p := range parts {
		if p == "" || (len(p) > 1 && p[0] == '0') {
			return v, fmt.Errorf("invalid number %q in %q", p, s)
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return v, fmt.Errorf("invalid number %q in %q", p, s)
		}
		nums[i] = n
	}
	v.Major, v.Minor, v.Patch = nums[0], nums[1], nums[2]
	return v, nil
}

func validIdentifiers(s string, noLeadingZero bool) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		numeric := true
		for _, c := range id {
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				numeric = false
			default:
				return false
			}
		}
		if noLeadingZero && numeric && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

func (v Version) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if len(v.Pre) > 0 {
		s += "-" + strings.Join(v.Pre, ".")
	}
	if v.Build != "" {
		s += "+" + v.Build
	}
	return s
}

// Compare orders by semver precedence: -1, 0 or +1.
func (v Version) Compare(o Version) int {
	for _, d := range [][2]uint64{{v.Major, o.Major}, {v.Minor, o.Minor}, {v.Patch, o.Patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	// A pre-release sorts before its release.
	switch {
	case len(v.Pre) == 0 && len(o.Pre) == 0:
		return 0
	case len(v.Pre) == 0:
		return 1
	case len(o.Pre) == 0:
		return -1
	}
	for i := 0; i < len(v.Pre) && i < len(o.Pre); i++ {
		if c := compareIdentifier(v.Pre[i], o.Pre[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(v.Pre) < len(o.Pre):
		return -1
	case len(v.Pre) > len(o.Pre):
		return 1
	}
	return 0
}

func compareIdentifier(a, b string) int {
	na, errA := strconv.ParseUint(a, 10, 64)
	nb, errB := strconv.ParseUint(b, 10, 64)
	switch {
	case errA == nil && errB == nil:
		if na == nb {
			return 0
		}
		if na < nb {
			return -1
		}
		return 1
	case errA == nil: // numeric identifiers sort before alphanumeric ones
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// AtLeast reports whether v >= min by precedence.
func (v Version) AtLeast(min Version) bool { return v.Compare(min) >= 0 }

// EnvironmentdVersion reads the version from an environmentd image tag
// "vX.Y.Z" (Docker tags cannot hold '+', so "--" stands for it). ok is false
// when the reference has no tag or the tag is not such a version; upstream
// then treats the image as current, and so does the operator.
func EnvironmentdVersion(ref string) (v Version, tag string, ok bool) {
	// Upstream splits at the last ':' of the whole reference, so a digest
	// hides the tag; the same reference must mean the same version here.
	i := strings.LastIndexByte(ref, ':')
	if i < 0 {
		return v, "", false
	}
	tag = ref[i+1:]
	if strings.Contains(tag, "/") {
		return v, "", false // a registry port, not a tag
	}
	s, found := strings.CutPrefix(tag, "v")
	if !found {
		return v, tag, false
	}
	v, err := ParseVersion(strings.ReplaceAll(s, "--", "+"))
	return v, tag, err == nil
}

// ValidUpgrade is upstream's is_valid_upgrade_version: may an environment
// whose last completed rollout ran active roll out next? Never backwards
// (by precedence, build metadata aside); from 0.x one minor version at a
// time (0.130 to 0.147 allowed), to 26 only from 0.147.20+ or 0.164+; from
// 26 on at most one major version ahead.
func ValidUpgrade(active, next Version) bool {
	if next.Compare(active) < 0 {
		return false
	}
	switch {
	case active.Major == 0:
		if next.Major != 0 {
			return next.Major == 26 && ((active.Minor == 147 && active.Patch >= 20) || active.Minor >= 164)
		}
		if next.Minor == 147 && active.Minor == 130 {
			return true
		}
		return next.Minor <= active.Minor+1
	case active.Major >= 26:
		return next.Major <= active.Major+1
	}
	return true
}

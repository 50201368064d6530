package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
)

// The tables cover every upstream release line (major.minor) from -since to
// the generated commit: one table per program holds the newest command line
// and, for each argument, the releases that have it (Arg.Since, Arg.Until),
// plus the older definitions of arguments that changed or went away.
//
// A release line is read at its first tag (the lowest vX.Y.* tag, usually
// vX.Y.0-rc.1). Where the repository has no tag of a line, it is read where
// upstream's release tooling cut it (misc/python/materialize/release/
// auto_cut_release.py): the release branch starts at main's head, and main
// then moves to the next line's vX.Y+1.0-dev.0 in a commit "release: bump to
// version ..."; that commit's parent, whose src/environmentd/Cargo.toml says
// X.Y.0-dev.*, is the line's first release candidate's source.

// minorVersion is a release line.
type minorVersion struct{ major, minor uint64 }

func (v minorVersion) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

func (v minorVersion) less(o minorVersion) bool {
	return v.major < o.major || (v.major == o.major && v.minor < o.minor)
}

// parseMinor reads "X.Y" or the release line of a version "X.Y.Z[-pre]".
func parseMinor(s string) (minorVersion, error) {
	parts := strings.SplitN(strings.TrimPrefix(s, "v"), ".", 3)
	if len(parts) < 2 {
		return minorVersion{}, fmt.Errorf("%q is not MAJOR.MINOR", s)
	}
	major, err1 := strconv.ParseUint(parts[0], 10, 64)
	minor, err2 := strconv.ParseUint(strings.SplitN(parts[1], "-", 2)[0], 10, 64)
	if err1 != nil || err2 != nil {
		return minorVersion{}, fmt.Errorf("%q is not MAJOR.MINOR", s)
	}
	return minorVersion{major, minor}, nil
}

// release is one release line's source.
type release struct {
	version minorVersion
	commit  string
	// from says how the commit was found, for the generated header.
	from string
	cmds map[string]*Command // by program name
}

// versionCrate is the package whose version the workspace's environmentd is
// built as.
const (
	versionCrate = "src/environmentd"
	versionFile  = versionCrate + "/Cargo.toml"
)

// packageVersion reads the [package] version of versionFile.
func packageVersion(up *rustsrc.Source) (string, error) {
	m, err := up.Manifest(versionCrate)
	if err != nil {
		return "", err
	}
	if m.Version == "" {
		return "", fmt.Errorf("%s: no [package] version", versionFile)
	}
	return m.Version, nil
}

var (
	tagPattern  = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?$`)
	bumpPattern = regexp.MustCompile(`^release: bump to version v(\d+)\.(\d+)\.0-dev\.0$`)
)

// semverLess orders tag versions by semver precedence (no build metadata).
func semverLess(a, b []string) bool {
	for i := 1; i <= 3; i++ {
		x, _ := strconv.ParseUint(a[i], 10, 64)
		y, _ := strconv.ParseUint(b[i], 10, 64)
		if x != y {
			return x < y
		}
	}
	if (a[4] == "") != (b[4] == "") {
		return a[4] != "" // a pre-release precedes its release
	}
	pa, pb := strings.Split(a[4], "."), strings.Split(b[4], ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		x, errx := strconv.ParseUint(pa[i], 10, 64)
		y, erry := strconv.ParseUint(pb[i], 10, 64)
		switch {
		case errx == nil && erry == nil:
			return x < y
		case errx == nil || erry == nil:
			return errx == nil // numeric identifiers come first
		}
		return pa[i] < pb[i]
	}
	return len(pa) < len(pb)
}

func git(dir string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// releasePoints finds the source of each release line from since up to,
// not including, newest, in the repository at dir whose history ends at
// head; lines with neither a tag nor a cut are named in missing.
func releasePoints(dir, head string, since, newest minorVersion) (points []release, missing []minorVersion, err error) {
	found := map[minorVersion]release{}
	// First tags.
	out, err := git(dir, "tag", "--list", "v*")
	if err != nil {
		return nil, nil, err
	}
	first := map[minorVersion][]string{}
	for _, tag := range strings.Fields(out) {
		m := tagPattern.FindStringSubmatch(tag)
		if m == nil {
			continue
		}
		v, _ := parseMinor(m[1] + "." + m[2])
		if v.less(since) || !v.less(newest) {
			continue
		}
		if cur, ok := first[v]; !ok || semverLess(m, cur) {
			first[v] = m
		}
	}
	for v, m := range first {
		commit, err := git(dir, "rev-parse", "--verify", m[0]+"^{commit}")
		if err != nil {
			return nil, nil, err
		}
		found[v] = release{version: v, commit: strings.TrimSpace(commit), from: "tag " + m[0]}
	}
	// Cuts, for lines without a tag. git log lists the newest first; a line
	// bumped past twice keeps its first cut.
	out, err = git(dir, "log", "--format=%H %P%x00%s", "--grep=^release: bump to version v", head)
	if err != nil {
		return nil, nil, err
	}
	for _, line := range strings.Split(out, "\n") {
		hashes, subject, ok := strings.Cut(line, "\x00")
		if !ok {
			continue
		}
		m := bumpPattern.FindStringSubmatch(subject)
		if m == nil {
			continue
		}
		h := strings.Fields(hashes)
		if len(h) < 2 {
			continue
		}
		next, _ := parseMinor(m[1] + "." + m[2])
		parent := rustsrc.AtCommit(dir, h[1])
		pv, err := packageVersion(parent)
		if err != nil {
			return nil, nil, fmt.Errorf("parent of %s (%s): %v", h[0][:10], subject, err)
		}
		v, err := parseMinor(pv)
		if err != nil || !v.less(next) {
			continue // not a move to a newer line
		}
		if v.less(since) || !v.less(newest) {
			continue
		}
		if r, ok := found[v]; ok && strings.HasPrefix(r.from, "tag ") {
			continue
		}
		found[v] = release{version: v, commit: h[1],
			from: fmt.Sprintf("%s (%s), parent of %s %q", h[1][:10], pv, h[0][:10], subject)}
	}
	for _, r := range found {
		points = append(points, r)
	}
	sort.Slice(points, func(i, j int) bool { return points[i].version.less(points[j].version) })
	// Lines in between without a source (counted within a major).
	lo := since
	for _, hi := range append(versionsOf(points), newest) {
		for v := lo; v.major == hi.major && v.less(hi); v.minor++ {
			missing = append(missing, v)
		}
		lo = minorVersion{hi.major, hi.minor + 1}
	}
	return points, missing, nil
}

func versionsOf(rs []release) []minorVersion {
	var vs []minorVersion
	for _, r := range rs {
		vs = append(vs, r.version)
	}
	return vs
}

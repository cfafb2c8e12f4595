package version

import (
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

func TestFromGit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ describe, want string }{
		{"v1.2.3", "1.2.3"},
		{"v1.2.3-dirty", "1.2.3-dirty"},
		{"v1.2.3-4-gabc1234", "1.2.3-4-gabc1234"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.3-4-gabc1234-dirty"},
		{"v10.20.30-400-g0123456789ab", "10.20.30-400-g0123456789ab"},
		{"4750ec4", "0.0.0-206-g4750ec4"},
		{"4750ec4-dirty", "0.0.0-206-g4750ec4-dirty"},
		// Already in the scheme (nxdnsrelease -version 0.3.0-1-gabc1234).
		{"1.2.3", "1.2.3"},
		{"0.0.0-206-g4750ec4", "0.0.0-206-g4750ec4"},
		{"0.0.0-g4750ec4-dirty", "0.0.0-g4750ec4-dirty"},
	} {
		got, err := FromGit(c.describe, 206)
		if err != nil || got != c.want {
			t.Errorf("FromGit(%q) = %q, %v; want %q", c.describe, got, err, c.want)
		}
		if err == nil && !Valid(got) {
			t.Errorf("FromGit(%q) = %q is not Valid", c.describe, got)
		}
	}
	for _, bad := range []string{"", "v1.2", "release one", "v1.2.3_4", "v1.2.3-rc.1", "1.2.3~rc1", "v1.2.3-4-gXYZ", "nxdnsd 1.2.3"} {
		if got, err := FromGit(bad, 1); err == nil {
			t.Errorf("FromGit(%q) = %q, want an error", bad, got)
		}
	}
	if got, err := FromGit("4750ec4", 0); err == nil {
		t.Errorf("FromGit with no commit count = %q, want an error", got)
	}
}

func buildInfo(mainVersion string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/nxdnsd/nxdnsd", Version: mainVersion}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

// What go build records in a git clone (Go 1.24 and later: the tag on
// the commit, else a pseudo-version, "+dirty" for uncommitted changes)
// gives the release's version by the same rule, less the commit count.
func TestFromBuildInfo(t *testing.T) {
	t.Parallel()
	const rev = "4750ec4a6e2b9d0c1f3e5a7b9c0d2e4f6a8b0c1d"
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, Devel},
		{"-buildvcs=false", buildInfo("(devel)"), Devel},
		{"go test", buildInfo(""), Devel},
		{"on a release tag", buildInfo("v1.2.3", "vcs.revision", rev, "vcs.modified", "false"), "1.2.3"},
		{"on a release tag, modified", buildInfo("v1.2.3+dirty", "vcs.revision", rev, "vcs.modified", "true"), "1.2.3-dirty"},
		{"after a release tag", buildInfo("v1.2.4-0.20261201161904-4750ec4a6e2b", "vcs.revision", rev, "vcs.modified", "false"), "1.2.3-g4750ec4"},
		{"after v0.1.0", buildInfo("v0.1.1-0.20261201161904-4750ec4a6e2b", "vcs.revision", rev), "0.1.0-g4750ec4"},
		{"no tag yet", buildInfo("v0.0.0-20261201161904-4750ec4a6e2b+dirty", "vcs.revision", rev, "vcs.modified", "true"), "0.0.0-g4750ec4-dirty"},
		{"after a pre-release tag", buildInfo("v1.2.3-rc.1.0.20261201161904-4750ec4a6e2b", "vcs.revision", rev), "0.0.0-g4750ec4"},
		{"a worktree: revision only", buildInfo("(devel)", "vcs.revision", rev, "vcs.modified", "true"), "0.0.0-g4750ec4-dirty"},
		{"a pre-release tag on the commit", buildInfo("v1.2.3-rc.1", "vcs.revision", rev), "0.0.0-g4750ec4"},
	} {
		got := FromBuildInfo(c.bi)
		if got != c.want {
			t.Errorf("%s: FromBuildInfo = %q, want %q", c.name, got, c.want)
		}
		if got != Devel && !Valid(got) {
			t.Errorf("%s: %q is not Valid", c.name, got)
		}
	}
}

// Every version is one string for a file name, an OCI image tag and, with
// its revision, a .deb's Version, and the versions sort in dpkg as the
// commits follow each other: no release tag yet, the first tag, the
// commits after it, the next tag.
func TestVersionsAreDebianAndOCI(t *testing.T) {
	t.Parallel()
	history := []string{
		"4750ec4", // 206th commit, no tag
		"9b1c2d3", // 207th
		"v0.1.0",
		"v0.1.0-1-g0a1b2c3",
		"v0.1.0-9-gfedcba9",
		"v0.1.0-10-g1234567",
		"v0.1.1",
		"v0.2.0",
		"v0.10.0",
		"v1.0.0",
	}
	ociTag := regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	var prev string
	for i, d := range history {
		v, err := FromGit(d, 206+i)
		if err != nil {
			t.Fatal(err)
		}
		deb := Debian(v)
		if msg := debianProblem(deb); msg != "" {
			t.Errorf("%s: .deb version %q: %s", d, deb, msg)
		}
		if !ociTag.MatchString(v) || strings.ContainsAny(v, "/ ") {
			t.Errorf("%s: %q is not an OCI tag or a plain file name", d, v)
		}
		if prev != "" && compareDebian(Debian(prev), deb) >= 0 {
			t.Errorf("dpkg sorts %s before %s: want %s first", deb, Debian(prev), Debian(prev))
		}
		prev = v
	}
	// The comparison itself, on dpkg's documented examples.
	for _, c := range [][2]string{{"1.0~rc1-1", "1.0-1"}, {"1.0-1", "1.0.1-1"}, {"1.0-1", "1.0-2"}, {"1.9-1", "1.10-1"}, {"0.0.0-206-g4750ec4-1", "0.1.0-1"}} {
		if compareDebian(c[0], c[1]) >= 0 || compareDebian(c[1], c[0]) <= 0 {
			t.Errorf("compareDebian(%s, %s) out of order", c[0], c[1])
		}
	}
}

// debianProblem checks a Debian version (deb-version(7)) without an
// epoch: an upstream version that begins with a digit, of alphanumerics
// and . + ~ - (the hyphen only because a revision follows), and a revision
// of alphanumerics and . + ~.
func debianProblem(v string) string {
	i := strings.LastIndexByte(v, '-')
	if i < 0 {
		return "no revision"
	}
	up, rev := v[:i], v[i+1:]
	if up == "" || up[0] < '0' || up[0] > '9' {
		return "the upstream version does not begin with a digit"
	}
	if strings.Trim(up, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.+~-") != "" {
		return "the upstream version has a character dpkg refuses"
	}
	if rev == "" || strings.Trim(rev, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.+~") != "" {
		return "bad revision"
	}
	return ""
}

// compareDebian compares two Debian versions without epochs as dpkg does
// (lib/dpkg/version.c: the upstream versions, then the revisions).
func compareDebian(a, b string) int {
	ia, ib := strings.LastIndexByte(a, '-'), strings.LastIndexByte(b, '-')
	if c := verrevcmp(a[:ia], b[:ib]); c != 0 {
		return c
	}
	return verrevcmp(a[ia+1:], b[ib+1:])
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func order(s string) int {
	if s == "" {
		return 0
	}
	c := s[0]
	switch {
	case isDigit(c):
		return 0
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return int(c)
	case c == '~':
		return -1
	default:
		return int(c) + 256
	}
}

func verrevcmp(a, b string) int {
	for a != "" || b != "" {
		for a != "" && !isDigit(a[0]) || b != "" && !isDigit(b[0]) {
			if ac, bc := order(a), order(b); ac != bc {
				return ac - bc
			}
			a, b = rest(a), rest(b)
		}
		for a != "" && a[0] == '0' {
			a = a[1:]
		}
		for b != "" && b[0] == '0' {
			b = b[1:]
		}
		first := 0
		for a != "" && isDigit(a[0]) && b != "" && isDigit(b[0]) {
			if first == 0 {
				first = int(a[0]) - int(b[0])
			}
			a, b = a[1:], b[1:]
		}
		if a != "" && isDigit(a[0]) {
			return 1
		}
		if b != "" && isDigit(b[0]) {
			return -1
		}
		if first != 0 {
			return first
		}
	}
	return 0
}

func rest(s string) string {
	if s == "" {
		return s
	}
	return s[1:]
}

// The arguments skip pre-release tags and ask for the hash when there is
// no tag: the two cases FromGit is written for.
func TestDescribeArgs(t *testing.T) {
	t.Parallel()
	for _, want := range []string{"--tags", "--dirty", "--always", "--exclude"} {
		if !slices.Contains(DescribeArgs, want) {
			t.Errorf("DescribeArgs %q lacks %s", DescribeArgs, want)
		}
	}
}

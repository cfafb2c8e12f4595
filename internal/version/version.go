// Package version is nxdnsd's one version scheme (issue 24). The release
// names its archives, its .deb and its image with the string FromGit
// makes, and stamps the same string into the binary; a source build that
// was not stamped reports FromBuildInfo's, made by the same rule from what
// the Go toolchain recorded.
//
// The scheme, from the last release tag vX.Y.Z (pre-release tags such as
// v1.2.0-rc.1 are not release tags: they are skipped, so that every
// version sorts in dpkg as the commits follow each other):
//
//	1.2.3                 the tagged commit
//	1.2.3-4-gabc1234      4 commits after v1.2.3, at abc1234
//	0.0.0-206-g4750ec4    no release tag yet: the 206th commit, 4750ec4
//	…-dirty               a work tree with uncommitted changes
//
// Every version is made of [0-9a-z.-] only, begins with a digit and sorts
// in dpkg as the commits follow each other on a branch, so the same string
// is a file name, an OCI image tag and, with the Debian revision "-1", a
// .deb's version.
package version

import (
	"fmt"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
)

// Devel is the version of a build that knows nothing of its commit: not
// stamped, and built without version control information (-buildvcs=false,
// or outside a git clone).
const Devel = "devel"

// DescribeArgs are the arguments of the git command whose output FromGit
// takes: the nearest release tag (vX.Y.Z, no pre-release), or the
// abbreviated hash when there is none, and -dirty for uncommitted changes.
var DescribeArgs = []string{"describe", "--tags", "--match", "v[0-9]*.[0-9]*.[0-9]*", "--exclude", "v*-*", "--dirty", "--always", "--abbrev=7"}

var (
	describeRE = regexp.MustCompile(`^v?([0-9]+\.[0-9]+\.[0-9]+)(?:-([0-9]+)-g([0-9a-f]{4,40}))?$`)
	hashRE     = regexp.MustCompile(`^[0-9a-f]{4,40}$`)
	validRE    = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9]+-g[0-9a-f]{4,40}|-g[0-9a-f]{4,40})?(?:-dirty)?$`)
)

// FromGit returns the version of a commit from git's output for
// DescribeArgs and the number of commits up to it (git rev-list --count
// HEAD, used only when there is no release tag). A version already in
// the scheme is returned as it is.
func FromGit(describe string, commits int) (string, error) {
	d, dirty := strings.CutSuffix(describe, "-dirty")
	var v string
	if m := describeRE.FindStringSubmatch(d); m != nil {
		v = m[1]
		if m[2] != "" {
			v += "-" + m[2] + "-g" + m[3]
		}
	} else if hashRE.MatchString(d) {
		if commits < 1 {
			return "", fmt.Errorf("version of %q: the commit count %d is not positive", describe, commits)
		}
		v = "0.0.0-" + strconv.Itoa(commits) + "-g" + d
	} else if validRE.MatchString(describe) {
		return describe, nil
	} else {
		return "", fmt.Errorf("version of %q: want vX.Y.Z[-N-gHASH][-dirty] (a release tag, git describe) or a commit hash", describe)
	}
	if dirty {
		v += "-dirty"
	}
	return v, nil
}

// Valid reports whether v is a version of the scheme.
func Valid(v string) bool { return validRE.MatchString(v) }

var (
	// The Go toolchain's main-module version from the VCS: the tag on the
	// commit, else a pseudo-version (golang.org/ref/mod#pseudo-versions),
	// "+dirty" for uncommitted changes.
	tagRE    = regexp.MustCompile(`^v([0-9]+\.[0-9]+\.[0-9]+)$`)
	pseudoRE = regexp.MustCompile(`^v([0-9]+)\.([0-9]+)\.([0-9]+)-0\.[0-9]{14}-[0-9a-f]{12}$`)
)

// FromBuildInfo is the version of a build that was not stamped, by the
// rule of FromGit from what the Go toolchain recorded (go build in a git
// clone, without -buildvcs=false): the release tag on the commit gives
// the same string as the release (1.2.3, 1.2.3-dirty); another commit
// gives the last release tag (0.0.0 if none) and the hash without the
// commit count, which the toolchain does not record (1.2.3-gabc1234,
// 0.0.0-g4750ec4); no version control information gives Devel.
func FromBuildInfo(bi *debug.BuildInfo) string {
	if bi == nil {
		return Devel
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	mv, plus := strings.CutSuffix(bi.Main.Version, "+dirty")
	dirty = dirty || plus
	suffix := ""
	if dirty {
		suffix = "-dirty"
	}
	if m := tagRE.FindStringSubmatch(mv); m != nil {
		return m[1] + suffix
	}
	if len(rev) < 7 || !hashRE.MatchString(rev) {
		return Devel
	}
	base := "0.0.0"
	// vX.Y.(Z+1)-0.TIME-HASH follows the release tag vX.Y.Z. The other
	// forms follow no tag (v0.0.0-TIME-HASH) or a pre-release tag, which
	// the scheme skips: its release tag is not recorded.
	if m := pseudoRE.FindStringSubmatch(mv); m != nil {
		if z, err := strconv.Atoi(m[3]); err == nil && z > 0 {
			base = m[1] + "." + m[2] + "." + strconv.Itoa(z-1)
		}
	}
	return base + "-g" + rev[:7] + suffix
}

// Debian is the version of v's .deb: v and the Debian revision 1 (the
// packaging's first revision of that upstream version).
func Debian(v string) string { return v + "-1" }

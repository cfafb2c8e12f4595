package main

import (
	"strings"
	"testing"

	internalversion "github.com/nxdnsd/nxdnsd/internal/version"
)

// An unstamped build reports internal/version's version of its own build
// record, never a hard-coded one (issue 24: a source build said 0.1.0-dev
// whatever its commit). The test binary has no version control record,
// so that is "devel"; .ci/version-check builds from a git clone.
func TestVersionUnstamped(t *testing.T) {
	want := internalversion.FromBuildInfo(readBuildInfo())
	if version != want {
		t.Errorf("version %q, want %q (from the build record)", version, want)
	}
	if want != internalversion.Devel && !internalversion.Valid(want) {
		t.Errorf("version %q is neither devel nor of the scheme", want)
	}
	if code, out, _ := runArgs("-version"); code != 0 || !strings.HasPrefix(out, "nxdnsd "+want+" (commit ") {
		t.Errorf("-version: exit %d, %q; want nxdnsd %s (commit …", code, out, want)
	}
}

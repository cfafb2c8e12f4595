package main

import (
	"runtime/debug"

	internalversion "github.com/nxdnsd/nxdnsd/internal/version"
)

// An unstamped build (go build, go install, go run) reports the version
// internal/version makes from the build's own record: the release's
// string on a release tag, the last tag and the hash elsewhere, "devel"
// without version control information. It runs before main, so every use
// of version sees it.
func init() {
	if version == "" {
		version = internalversion.FromBuildInfo(readBuildInfo())
	}
}

func readBuildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// CoreDNS for the blocking run (issue 33): version corednsVersion, built
// with `go build` from its module in a temporary module of its own (go mod
// init tmp, go get, go build), so that nxdnsd's go.mod never gains it. The
// binary is kept in the user cache directory,
// nxdnsbench/coredns-VERSION/coredns, and built only when it is not there.
const (
	corednsModule  = "github.com/coredns/coredns"
	corednsVersion = "v1.15.0"

	// corednsBuildTimeout bounds the build: its module graph is large (the
	// Kubernetes and cloud SDKs), a first download and compile on two
	// shared cores takes minutes.
	corednsBuildTimeout = 30 * time.Minute
)

// corednsPath is where the built CoreDNS is kept.
func corednsPath() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "nxdnsbench", "coredns-"+corednsVersion[1:], "coredns"), nil
}

// findCoreDNS returns the CoreDNS binary: bin when it is given, else the
// cached build, built first when it is missing. progress says when a build
// starts.
func findCoreDNS(ctx context.Context, bin string, progress func(string, ...any)) (string, error) {
	if bin != "" {
		return exec.LookPath(bin)
	}
	path, err := corednsPath()
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		return path, nil
	}
	progress("building CoreDNS %s with go build in a temporary module (once; kept as %s)", corednsVersion, path)
	if err := buildCoreDNS(ctx, path); err != nil {
		return "", err
	}
	return path, nil
}

// buildCoreDNS builds corednsModule at corednsVersion into out, through a
// temporary module beside it that is removed afterwards. out appears only
// once the build has succeeded.
func buildCoreDNS(ctx context.Context, out string) error {
	ctx, cancel := context.WithTimeout(ctx, corednsBuildTimeout)
	defer cancel()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	mod, err := os.MkdirTemp(filepath.Dir(out), "module-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(mod)
	tmpOut := filepath.Join(mod, "coredns")
	steps := [][]string{
		{"go", "mod", "init", "tmp"},
		{"go", "get", corednsModule + "@" + corednsVersion},
		{"go", "build", "-o", tmpOut, corednsModule},
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, s[0], s[1:]...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building CoreDNS %s: %v: %w: %s", corednsVersion, s, err, lastLines(string(b), 10))
		}
	}
	return os.Rename(tmpOut, out)
}

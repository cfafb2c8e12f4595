package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The release's version from a real git history (issue 24): the commit
// count and hash before any release tag, the tag on its commit, the tag
// and the distance after it, -dirty for uncommitted changes; pre-release
// and other tags are not release tags.
func TestGitVersion(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("prerequisite missing: git: %v", err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("HOME", dir)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	for _, kv := range [][2]string{{"GIT_AUTHOR_NAME", "t"}, {"GIT_AUTHOR_EMAIL", "t@example.invalid"},
		{"GIT_COMMITTER_NAME", "t"}, {"GIT_COMMITTER_EMAIL", "t@example.invalid"}} {
		t.Setenv(kv[0], kv[1])
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := git(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	n := 0
	commit := func() string {
		t.Helper()
		n++
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte{byte(n)}, 0o644); err != nil {
			t.Fatal(err)
		}
		run("add", "f")
		run("commit", "-q", "-m", "c")
		return run("rev-parse", "--short=7", "HEAD")
	}
	check := func(want string) {
		t.Helper()
		got, err := gitVersion("")
		if err != nil || got != want {
			t.Errorf("gitVersion = %q, %v; want %q", got, err, want)
		}
	}

	run("init", "-q")
	h := commit()
	check("0.0.0-1-g" + h)
	h = commit()
	check("0.0.0-2-g" + h)
	os.WriteFile(filepath.Join(dir, "f"), []byte("edited"), 0o644)
	check("0.0.0-2-g" + h + "-dirty")
	run("checkout", "-q", "f")

	run("tag", "v0.1.0")
	check("0.1.0")
	run("tag", "session-6") // not a release tag
	h = commit()
	check("0.1.0-1-g" + h)
	run("tag", "v0.2.0-rc.1") // a pre-release: skipped
	check("0.1.0-1-g" + h)
	os.WriteFile(filepath.Join(dir, "f"), []byte("edited"), 0o644)
	check("0.1.0-1-g" + h + "-dirty")

	if got, err := gitVersion("v9.8.7"); err != nil || got != "9.8.7" {
		t.Errorf("gitVersion(v9.8.7) = %q, %v", got, err)
	}
	if got, err := gitVersion("9.8.7-3-gabc1234"); err != nil || got != "9.8.7-3-gabc1234" {
		t.Errorf("gitVersion(9.8.7-3-gabc1234) = %q, %v", got, err)
	}
	if got, err := gitVersion("nightly"); err == nil {
		t.Errorf("gitVersion(nightly) = %q, want an error", got)
	}
}

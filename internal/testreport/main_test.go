package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goTestJSON runs go test -json on a module of its own: a package whose
// tests pass, fail and skip, with and without a missing prerequisite, and
// one whose tests all pass.
func goTestJSON(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.invalid/m\n\ngo 1.26\n",
		"a/a_test.go": `package a

import "testing"

func TestPasses(t *testing.T) {}

func TestFails(t *testing.T) { t.Log("before"); t.Error("the answer was wrong") }

func TestByDesign(t *testing.T) { t.Skip("a load test") }

func TestNeedsChromium(t *testing.T) {
	t.Log("looking for chromium")
	t.Skip("prerequisite missing: Chromium is not installed")
}

func TestFailedSubtest(t *testing.T) {
	t.Log("parent")
	t.Run("sub", func(t *testing.T) { t.Error("the sub's answer was wrong") })
}

func TestSubtests(t *testing.T) {
	for _, n := range []string{"one", "two"} {
		t.Run(n, func(t *testing.T) { t.Skipf("prerequisite missing: IPv6 loopback: %s", "no ::1") })
	}
}
`,
		"b/b_test.go": "package b\n\nimport \"testing\"\n\nfunc TestPasses(t *testing.T) {}\n",
	}
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-count=1", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	if _, failed := err.(*exec.ExitError); err != nil && !failed {
		t.Fatalf("go test: %v", err)
	}
	return out
}

// What go test -json of a real run becomes: go test's closing lines and
// each failed test's output, then one line per group of skips with their
// reasons, the prerequisites first; -strict fails on those.
func TestReport(t *testing.T) {
	t.Parallel()
	stream := goTestJSON(t)
	var out bytes.Buffer
	if code := report(bytes.NewReader(stream), &out, false); code != 1 {
		t.Errorf("exit %d with a failed test, want 1", code)
	}
	got := out.String()
	// Each failed test's lines as go test writes them: its result line,
	// its logs, then its failed subtests' own.
	for _, want := range []string{
		`--- FAIL: TestFails \([0-9.]+s\)\n    a_test.go:7: before\n    a_test.go:7: the answer was wrong\n`,
		`--- FAIL: TestFailedSubtest \([0-9.]+s\)\n    a_test.go:\d+: parent\n\s*--- FAIL: TestFailedSubtest/sub \([0-9.]+s\)\n\s+a_test.go:\d+: the sub's answer was wrong\n`,
	} {
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("the report lacks %s:\n%s", want, got)
		}
	}
	for _, want := range []string{
		"--- FAIL: TestFails (",
		"\nFAIL\texample.invalid/m/a\t",
		"ok  \texample.invalid/m/b\t",
		"\nskipped: 4 tests, 3 for a missing prerequisite\n",
		"SKIP PREREQUISITE MISSING example.invalid/m/a TestNeedsChromium: Chromium is not installed\n",
		"SKIP PREREQUISITE MISSING example.invalid/m/a TestSubtests/one, TestSubtests/two: IPv6 loopback: no ::1\n",
		"SKIP by design example.invalid/m/a TestByDesign: a load test\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"=== RUN", "--- PASS", "looking for chromium", "\nPASS\n"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("the report has %q, which go test without -v does not write:\n%s", unwanted, got)
		}
	}
	// The prerequisites' groups come before the others.
	if i, j := strings.Index(got, "PREREQUISITE"), strings.Index(got, "by design"); i < 0 || j < i {
		t.Errorf("the skips are not prerequisites first:\n%s", got)
	}

	// Without the failed test: 0, unless -strict.
	passing := dropTest(stream, "TestFails", "TestFailedSubtest")
	for _, c := range []struct {
		strict bool
		want   int
	}{{false, 0}, {true, 1}} {
		var o bytes.Buffer
		if code := report(bytes.NewReader(passing), &o, c.strict); code != c.want {
			t.Errorf("strict %v: exit %d, want %d:\n%s", c.strict, code, c.want, o.String())
		}
		if c.strict && !strings.Contains(o.String(), "FAIL: 3 tests skipped for a missing prerequisite") {
			t.Errorf("strict: no FAIL line:\n%s", o.String())
		}
	}
	// Only skips by design: 0 even with -strict.
	var o bytes.Buffer
	if code := report(bytes.NewReader(dropTest(passing, "TestNeedsChromium", "TestSubtests")), &o, true); code != 0 {
		t.Errorf("strict with skips by design only: exit %d:\n%s", code, o.String())
	}
}

// dropTest returns stream without the events of the named tests (and
// their subtests), with their package's result made a pass.
func dropTest(stream []byte, names ...string) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(stream, []byte("\n")) {
		drop := false
		for _, n := range names {
			if regexp.MustCompile(`"Test":"` + n + `[/"]`).Match(line) {
				drop = true
			}
		}
		if drop {
			continue
		}
		line = bytes.Replace(line, []byte(`"Action":"fail","Package"`), []byte(`"Action":"pass","Package"`), 1)
		line = bytes.Replace(line, []byte(`"Output":"FAIL\n"`), []byte(`"Output":"PASS\n"`), 1)
		out = append(out, line...)
	}
	return out
}

// A build error is written and fails the run; a line that is not an
// event is written as it is.
func TestReportBuildFailure(t *testing.T) {
	t.Parallel()
	stream := `{"ImportPath":"example.invalid/m/c [example.invalid/m/c.test]","Action":"build-output","Output":"c/c_test.go:3:1: syntax error\n"}
{"ImportPath":"example.invalid/m/c [example.invalid/m/c.test]","Action":"build-fail"}
{"Action":"start","Package":"example.invalid/m/c"}
{"Action":"output","Package":"example.invalid/m/c","Output":"FAIL\texample.invalid/m/c [build failed]\n"}
{"Action":"fail","Package":"example.invalid/m/c","FailedBuild":"example.invalid/m/c [example.invalid/m/c.test]"}
go: some words of go's own
`
	var out bytes.Buffer
	if code := report(strings.NewReader(stream), &out, true); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{"c/c_test.go:3:1: syntax error\n", "FAIL\texample.invalid/m/c [build failed]\n", "go: some words of go's own\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "skipped:") {
		t.Errorf("a skip summary without skips:\n%s", out.String())
	}
}

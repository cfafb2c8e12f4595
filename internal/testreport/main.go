// Command testreport reads go test -json on its standard input and writes
// what go test writes without -json or -v — each package's ok, FAIL or
// "no test files" line, the whole output of every test that failed, build
// errors — and then one line per group of skipped tests, with the reason
// they gave. .ci/run pipes the README's test command through it (issue 24):
//
//	go test -race -count=1 -json ./... | go run ./internal/testreport
//
// A test that skips because something the machine lacks — Chromium, root,
// a network namespace, IPv6 — says so with a reason beginning
// "prerequisite missing: "; every other skip (-short, an opt-in
// environment variable, the race detector, another platform) is by
// design. With -strict, the default when CI is "true" or "1", a skip for a
// missing prerequisite fails the run: CI runs every test. The exit status
// is 1 when a test or a build failed, or for such a skip under -strict.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// PrerequisitePrefix begins the reason of a skip for something the
// machine lacks.
const PrerequisitePrefix = "prerequisite missing: "

func main() {
	ci := os.Getenv("CI")
	strict := flag.Bool("strict", ci == "true" || ci == "1", "fail when a test skipped for a missing prerequisite (default: when CI is true)")
	flag.Parse()
	os.Exit(report(os.Stdin, os.Stdout, *strict))
}

// event is one line of go test -json (cmd/test2json), build events
// included.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail
}

type testKey struct{ pkg, test string }

// skip is one skipped test.
type skip struct {
	pkg, test, reason string
}

// report copies go test -json from r to w as go test writes without -v,
// then the skipped tests; it returns the exit status (see the command's
// documentation).
func report(r io.Reader, w io.Writer, strict bool) int {
	out := bufio.NewWriter(w)
	defer out.Flush()
	open := map[testKey][]string{}      // output of each test still running
	subFailed := map[testKey][]string{} // failed subtests' output, by top-level test
	var skips []skip
	failed := false
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(out, "%s\n", line) // not an event: go test's own words
			continue
		}
		k := testKey{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			out.WriteString(e.Output)
		case "build-fail":
			failed = true
		case "output":
			if e.Test != "" {
				open[k] = append(open[k], e.Output)
			} else if e.Output != "PASS\n" {
				out.WriteString(e.Output)
			}
		case "pass":
			delete(open, k)
		case "skip":
			if e.Test != "" {
				skips = append(skips, skip{e.Package, e.Test, skipReason(open[k])})
			}
			delete(open, k)
		case "fail":
			failed = true
			if top, _, sub := strings.Cut(e.Test, "/"); sub {
				// Written after the top-level test's own lines, as go
				// test writes them.
				tk := testKey{e.Package, top}
				subFailed[tk] = append(subFailed[tk], resultFirst(open[k])...)
				delete(open, k)
				break
			}
			if e.Test != "" {
				writeTestOutput(out, append(resultFirst(open[k]), subFailed[k]...))
				delete(open, k)
				delete(subFailed, k)
				break
			}
			// The package failed: what its running tests wrote (a
			// timeout's or a panic's) explains it.
			var running []testKey
			for ok := range open {
				if ok.pkg == e.Package {
					running = append(running, ok)
				}
			}
			sort.Slice(running, func(i, j int) bool { return running[i].test < running[j].test })
			for _, rk := range running {
				writeTestOutput(out, append(resultFirst(open[rk]), subFailed[rk]...))
				delete(open, rk)
				delete(subFailed, rk)
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(out, "testreport: reading go test -json: %v\n", err)
		failed = true
	}
	missing := writeSkips(out, skips)
	status := 0
	if failed {
		status = 1
	}
	if missing > 0 && strict {
		fmt.Fprintf(out, "FAIL: %s skipped for a missing prerequisite; CI runs every test (install what they name)\n", tests(missing))
		status = 1
	}
	return status
}

var resultLine = regexp.MustCompile(`^\s*--- (FAIL|PASS|SKIP): `)

// resultFirst is a test's output with its "--- FAIL: TestX (…)" line first:
// go test -json writes it after the test's logs, go test before them.
func resultFirst(lines []string) []string {
	for i := len(lines) - 1; i >= 0; i-- {
		if resultLine.MatchString(lines[i]) {
			out := make([]string, 0, len(lines))
			out = append(out, lines[i])
			out = append(out, lines[:i]...)
			return append(out, lines[i+1:]...)
		}
	}
	return lines
}

// writeTestOutput writes a finished test's output without test2json's
// progress lines.
func writeTestOutput(w *bufio.Writer, lines []string) {
	for _, l := range lines {
		if strings.HasPrefix(l, "=== ") {
			continue
		}
		w.WriteString(l)
	}
}

// logLine is a line of t.Log, t.Skip and friends: "    file_test.go:40: text".
var logLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: (.*)$`)

// skipReason is the message of a skipped test: its last logged line
// before --- SKIP, with the lines that continue it.
func skipReason(lines []string) string {
	var reason []string
	for _, l := range lines {
		l = strings.TrimRight(l, "\n")
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "--- SKIP"), strings.HasPrefix(l, "=== "):
			continue
		case logLine.MatchString(l):
			reason = []string{logLine.FindStringSubmatch(l)[1]}
		case reason != nil && strings.TrimSpace(l) != "":
			reason = append(reason, strings.TrimSpace(l))
		}
	}
	if reason == nil {
		return "(no reason given)"
	}
	return strings.Join(reason, " ")
}

// writeSkips writes one line per group of skipped tests (a package and a
// reason), those for a missing prerequisite first, and returns how many
// tests skipped for one.
func writeSkips(w *bufio.Writer, skips []skip) int {
	if len(skips) == 0 {
		return 0
	}
	type group struct {
		pkg, reason string
		tests       []string
	}
	var groups []*group
	index := map[[2]string]*group{}
	missing := 0
	for _, s := range skips {
		if strings.HasPrefix(s.reason, PrerequisitePrefix) {
			missing++
		}
		g := index[[2]string{s.pkg, s.reason}]
		if g == nil {
			g = &group{pkg: s.pkg, reason: s.reason}
			index[[2]string{s.pkg, s.reason}] = g
			groups = append(groups, g)
		}
		g.tests = append(g.tests, s.test)
	}
	sort.SliceStable(groups, func(i, j int) bool {
		pi, pj := strings.HasPrefix(groups[i].reason, PrerequisitePrefix), strings.HasPrefix(groups[j].reason, PrerequisitePrefix)
		if pi != pj {
			return pi
		}
		if groups[i].pkg != groups[j].pkg {
			return groups[i].pkg < groups[j].pkg
		}
		return groups[i].reason < groups[j].reason
	})
	fmt.Fprintf(w, "\nskipped: %s, %d for a missing prerequisite\n", tests(len(skips)), missing)
	for _, g := range groups {
		kind, reason := "by design", g.reason
		if r, ok := strings.CutPrefix(g.reason, PrerequisitePrefix); ok {
			kind, reason = "PREREQUISITE MISSING", r
		}
		names := g.tests
		more := ""
		if len(names) > 3 {
			more = fmt.Sprintf(" and %d more", len(names)-3)
			names = names[:3]
		}
		fmt.Fprintf(w, "SKIP %s %s %s%s: %s\n", kind, g.pkg, strings.Join(names, ", "), more, reason)
	}
	return missing
}

func tests(n int) string {
	if n == 1 {
		return "1 test"
	}
	return fmt.Sprintf("%d tests", n)
}

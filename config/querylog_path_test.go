package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// queryLogProblems parses a configuration whose query_log.path is path and
// returns the problems found at query_log.path.
func queryLogProblems(t *testing.T, path string) []Problem {
	t.Helper()
	_, err := Parse(fmt.Appendf(nil, "[[upstreams]]\naddress = \"udp://9.9.9.9:53\"\n[query_log]\npath = %q\n", path))
	if err == nil {
		return nil
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse: %v, want Problems", err)
	}
	var out []Problem
	for _, p := range ps {
		if p.Path != "query_log.path" {
			t.Errorf("unexpected problem %s", p)
		}
		out = append(out, p)
	}
	return out
}

// The check refuses a query_log.path that start-up could not open (issue
// 16: a path in a missing directory passed -check, then nxdnsd exited 1 at
// start, and systemd restarted it every 2 s). Before the fix every path
// passed.
func TestQueryLogPathChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.log")
	if err := os.WriteFile(existing, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(dir, "plain")
	if err := os.WriteFile(aFile, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path, want string // want: "" when valid, else a part of the message
	}{
		{"off", "", ""},
		{"stdout", "-", ""},
		{"a new file", filepath.Join(dir, "query.log"), ""},
		{"an existing file", existing, ""},
		{"a missing directory", filepath.Join(dir, "missing", "query.log"), "does not exist"},
		{"a directory", dir, "is a directory"},
		{"under a file", filepath.Join(aFile, "query.log"), "not a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ps := queryLogProblems(t, tt.path)
			switch {
			case tt.want == "" && len(ps) != 0:
				t.Errorf("%q refused: %v", tt.path, ps)
			case tt.want != "" && (len(ps) != 1 || !strings.Contains(ps[0].Message, tt.want)):
				t.Errorf("%q: problems %v, want one saying %q", tt.path, ps, tt.want)
			}
		})
	}
}

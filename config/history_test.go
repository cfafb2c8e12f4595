package config

import (
	"errors"
	"strconv"
	"testing"
)

// Every [history] key out of range is reported at its path; a path naming
// a directory too.
func TestHistoryProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := Parse([]byte("[history]\nretention_days = 0\nmax_mib = -1\npath = " + strconv.Quote(dir) + "\n"))
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse: %v, want Problems", err)
	}
	want := map[string]bool{"history.retention_days": true, "history.max_mib": true, "history.path": true}
	for _, p := range ps {
		delete(want, p.Path)
	}
	if len(want) > 0 {
		t.Errorf("problems %v miss %v", ps, want)
	}
}

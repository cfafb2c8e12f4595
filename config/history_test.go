package config

import (
	"errors"
	"strconv"
	"strings"
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

// A connection string that does not parse is reported at
// history.postgres without its password; a bad instance name at
// history.instance.
func TestHistoryPostgresProblems(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("[history]\npostgres = \"postgres://u:s3cret@[::1:5432/db\"\ninstance = \"a\\nb\"\n"))
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse: %v, want Problems", err)
	}
	want := map[string]bool{"history.postgres": true, "history.instance": true}
	for _, p := range ps {
		delete(want, p.Path)
	}
	if len(want) > 0 {
		t.Errorf("problems %v miss %v", ps, want)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the password is in %q", err)
	}
	cfg, err := Parse([]byte("[history]\npostgres = \"host=127.0.0.1 dbname=h\"\ninstance = \"edge-1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.History.Postgres != "host=127.0.0.1 dbname=h" || cfg.History.InstanceName() != "edge-1" {
		t.Errorf("history = %+v", cfg.History)
	}
}

func TestRedactPostgres(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:s3cret@db:5432/h?sslmode=disable": "postgres://u:xxxxx@db:5432/h?sslmode=disable",
		"postgres://db/h?password=s3cret":               "postgres://db/h?password=xxxxx",
		"postgres://u@db/h":                             "postgres://u@db/h",
		"host=db password=s3cret user=u":                "host=db password=xxxxx user=u",
		`host=db password='s3 c\'ret' user=u`:           "host=db password=xxxxx user=u",
		"postgres://u:s3cret@[::1:5432/db":              "…@[::1:5432/db",
	} {
		if got := RedactPostgres(in); got != want {
			t.Errorf("RedactPostgres(%q) = %q, want %q", in, got, want)
		}
	}
}

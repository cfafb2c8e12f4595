// Package pgtest starts a PostgreSQL server of a test's own
// (internal/pgserver: a new data directory in a temporary directory, a
// free loopback port, fsync off), stopped at the end of the test. A test
// that needs one and finds no initdb is skipped with "prerequisite
// missing: initdb not installed", which internal/testreport fails under
// CI=true (.ci/run installs Debian's postgresql package).
package pgtest

import (
	"errors"
	"testing"

	"github.com/nxdnsd/nxdnsd/internal/pgserver"
)

// Server is a running PostgreSQL server whose methods fail the test on
// error.
type Server struct {
	s  *pgserver.Server
	tb testing.TB
}

// Start initialises and starts a server, stopped by tb's cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := pgserver.Start(pgserver.Options{})
	if errors.Is(err, pgserver.ErrNotInstalled) {
		tb.Skip("prerequisite missing: initdb not installed")
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return &Server{s: s, tb: tb}
}

// URL is a connection string for database postgres on the server.
func (s *Server) URL() string { return s.s.URL() }

// CreateDB creates a database and returns its connection string: tests
// sharing a server each take one of their own.
func (s *Server) CreateDB(name string) string {
	s.tb.Helper()
	url, err := s.s.CreateDB(name)
	if err != nil {
		s.tb.Fatal(err)
	}
	return url
}

// Stop stops the server (fast: connections are closed); Restart starts
// it again on the same port and data.
func (s *Server) Stop() {
	s.tb.Helper()
	if err := s.s.Stop(); err != nil {
		s.tb.Fatal(err)
	}
}

// Restart starts a stopped server and waits until it accepts connections.
func (s *Server) Restart() {
	s.tb.Helper()
	if err := s.s.Restart(); err != nil {
		s.tb.Fatal(err)
	}
}

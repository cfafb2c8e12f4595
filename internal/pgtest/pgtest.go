// Package pgtest starts a PostgreSQL server of a test's own: a new data
// directory in a temporary directory, a free loopback port, its unix
// socket beside the data, stopped at the end of the test. A test that
// needs one and finds no initdb is skipped with "prerequisite missing:
// initdb not installed", which internal/testreport fails under CI=true
// (.ci/run installs Debian's postgresql package).
package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// Server is a running PostgreSQL server.
type Server struct {
	bin, dir, data, port string
	asUser               string // "" when not root: the server runs as the test
	tb                   testing.TB
}

// bin finds the directory of initdb and pg_ctl: on PATH, else Debian's.
func bin() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- { // the newest version
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

// Start initialises and starts a server, stopped by tb's cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	b := bin()
	if b == "" {
		tb.Skip("prerequisite missing: initdb not installed")
	}
	// Not tb.TempDir: its parents are 0700 to root, and PostgreSQL
	// refuses to run as root.
	dir, err := os.MkdirTemp("", "nxdns-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{bin: b, dir: dir, data: filepath.Join(dir, "data"), tb: tb}
	if os.Geteuid() == 0 {
		s.asUser = "postgres"
		u, err := user.Lookup(s.asUser)
		if err != nil {
			tb.Fatalf("running as root, and there is no user postgres to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
	}
	s.port = strconv.Itoa(freePort(tb))
	s.run("initdb", "-D", s.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale", "--no-sync")
	s.Restart()
	tb.Cleanup(s.stop)
	return s
}

// freePort is a loopback TCP port nothing listens on now.
func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) run(prog string, args ...string) {
	s.tb.Helper()
	cmd := exec.Command(filepath.Join(s.bin, prog), args...)
	if s.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.asUser, "--", filepath.Join(s.bin, prog)}, args...)...)
	}
	cmd.Dir = s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		s.tb.Fatalf("%s %v: %v\n%s", prog, args, err, out)
	}
}

// URL is a connection string for database postgres on the server.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", s.port)
}

// CreateDB creates a database and returns its connection string: tests
// sharing a server each take one of their own.
func (s *Server) CreateDB(name string) string {
	s.tb.Helper()
	s.run("psql", "-h", s.dir, "-p", s.port, "-U", "postgres", "-d", "postgres", "-q", "-v", "ON_ERROR_STOP=1", "-c", "CREATE DATABASE "+name)
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/%s?sslmode=disable", s.port, name)
}

// Stop stops the server (fast: connections are closed); Restart starts
// it again on the same port and data.
func (s *Server) Stop() {
	s.tb.Helper()
	s.run("pg_ctl", "-D", s.data, "-m", "fast", "-w", "stop")
}

// Restart starts a stopped server and waits until it accepts connections.
func (s *Server) Restart() {
	s.tb.Helper()
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%s -c unix_socket_directories=%s -c fsync=off -c max_connections=50", s.port, s.dir)
	s.run("pg_ctl", "-D", s.data, "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "start")
}

func (s *Server) stop() {
	cmd := exec.Command(filepath.Join(s.bin, "pg_ctl"), "-D", s.data, "-m", "immediate", "-w", "stop")
	if s.asUser != "" {
		cmd = exec.Command("runuser", "-u", s.asUser, "--", filepath.Join(s.bin, "pg_ctl"), "-D", s.data, "-m", "immediate", "-w", "stop")
	}
	_ = cmd.Run() // already stopped by the test, or it was never up
}

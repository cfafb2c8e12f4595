// Package pgserver starts a throwaway PostgreSQL server: a new data
// directory in a temporary directory, a free loopback port, its unix
// socket beside the data, Debian's postgresql binaries (or initdb on
// PATH). The tests take one through internal/pgtest; nxdnsbench's
// -history-store postgres runs its history rows against one.
package pgserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrNotInstalled says that no initdb was found: neither on PATH nor in
// /usr/lib/postgresql/*/bin.
var ErrNotInstalled = errors.New("pgserver: initdb not installed")

// Options are how a server runs.
type Options struct {
	// Durable keeps PostgreSQL's defaults for durability (fsync and
	// synchronous_commit on), as a production server has them. false
	// sets fsync=off: a test's data is thrown away, and its disk
	// should not slow it.
	Durable bool
}

// Server is a running PostgreSQL server, its data in a temporary
// directory that Close removes.
type Server struct {
	bin, dir, data, port string
	asUser               string // "" when not root: the server runs as this process's user
	opts                 Options
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

// Start initialises and starts a server. The caller must Close it.
func Start(opts Options) (_ *Server, err error) {
	b := bin()
	if b == "" {
		return nil, ErrNotInstalled
	}
	// Not a test's TempDir: its parents are 0700 to root, and
	// PostgreSQL refuses to run as root.
	dir, err := os.MkdirTemp("", "nxdns-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: b, dir: dir, data: filepath.Join(dir, "data"), opts: opts}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if os.Geteuid() == 0 {
		s.asUser = "postgres"
		u, err := user.Lookup(s.asUser)
		if err != nil {
			return nil, fmt.Errorf("pgserver: running as root, and there is no user postgres to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s.port = strconv.Itoa(port)
	if err := s.run("initdb", "-D", s.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		return nil, err
	}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	return s, nil
}

// freePort is a loopback TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// command is prog of the server's binaries with args, run as the
// server's user.
func (s *Server) command(prog string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, prog), args...)
	if s.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.asUser, "--", filepath.Join(s.bin, prog)}, args...)...)
	}
	cmd.Dir = s.dir
	return cmd
}

func (s *Server) run(prog string, args ...string) error {
	if out, err := s.command(prog, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("pgserver: %s %v: %w\n%s", prog, args, err, out)
	}
	return nil
}

// URL is a connection string for database postgres on the server.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", s.port)
}

// CreateDB creates a database and returns its connection string.
func (s *Server) CreateDB(name string) (string, error) {
	err := s.run("psql", "-h", s.dir, "-p", s.port, "-U", "postgres", "-d", "postgres", "-q", "-v", "ON_ERROR_STOP=1", "-c", "CREATE DATABASE "+name)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/%s?sslmode=disable", s.port, name), nil
}

// Stop stops the server (fast: connections are closed); Restart starts
// it again on the same port and data.
func (s *Server) Stop() error {
	return s.run("pg_ctl", "-D", s.data, "-m", "fast", "-w", "stop")
}

// Restart starts a stopped server and waits until it accepts connections.
func (s *Server) Restart() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%s -c unix_socket_directories=%s -c max_connections=50", s.port, s.dir)
	if !s.opts.Durable {
		opts += " -c fsync=off"
	}
	return s.run("pg_ctl", "-D", s.data, "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "start")
}

// PID is the postmaster's process ID, from postmaster.pid (its first
// line): every other server process is its child.
func (s *Server) PID() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pgserver: postmaster.pid begins %q", first)
	}
	return pid, nil
}

// Log is the server's log file.
func (s *Server) Log() string { return filepath.Join(s.dir, "log") }

// Close stops the server at once (immediate: no checkpoint) if it is
// running and removes its directory.
func (s *Server) Close() {
	if _, err := os.Stat(filepath.Join(s.data, "postmaster.pid")); err == nil {
		_ = s.command("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop").Run()
	}
	os.RemoveAll(s.dir)
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nxdnsd/nxdnsd/internal/pgserver"
)

// The history rows with -history-store postgres (issue 32): the same rows
// with `[history] postgres` set instead of a file, against a throwaway
// PostgreSQL server on loopback (internal/pgserver, durable: fsync and
// synchronous_commit on, as a production server has them), a database of
// its own for each row. The server runs on the same cores as nxdnsd and
// dnsperf, so the rows' CPU per query counts its processes' CPU too
// (treeCPU), and after each row its database's rows are counted.

// History stores of -history-store.
const (
	storeSQLite   = "sqlite"
	storePostgres = "postgres"
)

// pgTimeout bounds one of nxdnsbench's own statements (CREATE DATABASE, a
// count of a row's rows).
const pgTimeout = time.Minute

// pgHistory is the PostgreSQL server of the history rows.
type pgHistory struct {
	srv     *pgserver.Server
	pid     int    // the postmaster's
	version string // server_version
}

// startPGHistory starts the server. The caller must close it.
func startPGHistory(ctx context.Context) (*pgHistory, error) {
	srv, err := pgserver.Start(pgserver.Options{Durable: true})
	if errors.Is(err, pgserver.ErrNotInstalled) {
		return nil, fmt.Errorf("-history-store postgres: %w: apt-get install -y postgresql", err)
	}
	if err != nil {
		return nil, err
	}
	p := &pgHistory{srv: srv}
	if p.pid, err = srv.PID(); err != nil {
		srv.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, pgTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&p.version); err != nil {
		srv.Close()
		return nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	return p, nil
}

func (p *pgHistory) close() { p.srv.Close() }

// newDB creates the database of the row name and returns its
// connection string.
func (p *pgHistory) newDB(name string) (string, error) {
	return p.srv.CreateDB(strings.ReplaceAll(name, "-", "_"))
}

// cpu is the CPU time the server's processes have used so far (treeCPU
// of the postmaster).
func (p *pgHistory) cpu() (time.Duration, error) { return treeCPU("/proc", p.pid) }

// countRows counts the history rows in the database at url.
func countRows(ctx context.Context, url string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, pgTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, "SELECT count(*) FROM nxdns_history").Scan(&n)
	return n, err
}

// treeCPU is the user and system CPU time a process and its children
// have used so far, from proc (/proc): the root's own and that of its
// children it has waited for (cutime, cstime: the backends that ended),
// plus each live child's own and its waited-for children's. The
// difference of two readings is what the tree used in between, the
// children that started or ended meanwhile included. PostgreSQL's
// processes are all the postmaster's children; a grandchild still
// running is not seen (PostgreSQL has none).
func treeCPU(proc string, root int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(root), "stat"))
	if err != nil {
		return 0, err
	}
	st, err := parseProcStat(b)
	if err != nil {
		return 0, fmt.Errorf("%s/%d/stat: %w", proc, root, err)
	}
	total := st.self + st.children
	dirs, err := os.ReadDir(proc)
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == root {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, d.Name(), "stat"))
		if err != nil {
			continue // ended since the directory was read: its time is in the root's cutime
		}
		if st, err := parseProcStat(b); err == nil && st.ppid == root {
			total += st.self + st.children
		}
	}
	return total, nil
}

// procStat is what treeCPU reads of a /proc/PID/stat line.
type procStat struct {
	ppid     int
	self     time.Duration // utime + stime
	children time.Duration // cutime + cstime
}

// parseProcStat reads fields 4 (ppid) and 14 to 17 (utime, stime, cutime,
// cstime, in clock ticks) of a /proc/PID/stat line.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return procStat{}, errors.New("no command name")
	}
	f := strings.Fields(string(b[i+1:])) // field 3 first
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("%d fields after the command name", len(f))
	}
	var n [5]int64
	for j, k := range []int{1, 11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil || v < 0 {
			return procStat{}, fmt.Errorf("field %d: %q", k+3, f[k])
		}
		n[j] = v
	}
	tick := func(v int64) time.Duration { return time.Duration(v) * time.Second / clockTicks }
	return procStat{ppid: int(n[0]), self: tick(n[1] + n[2]), children: tick(n[3] + n[4])}, nil
}

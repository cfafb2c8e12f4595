package main

import (
	"context"
	"errors"
	"fmt"
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
// (pgserver's CPU), and after each row its database's rows are counted.

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

// cpu is the CPU time the server's processes have used so far.
func (p *pgHistory) cpu() (time.Duration, error) { return p.srv.CPU() }

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

package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// applicationID marks a database as nxdnsd's history ("nxdh"): a SQLite
// file of another program is not ours to write into, so it is renamed
// aside like a damaged one.
const applicationID = 0x6e786468

// schemaVersion is PRAGMA user_version of the schema below.
const schemaVersion = 2

// The schema keeps a row to a few bytes (docs/history.md says what one
// costs):
//   - a row's key is the query's arrival in microseconds since the
//     database's epoch (meta), unique (a collision moves the later row by
//     1 µs): the time, the cursor and the order at once;
//   - rows are stored in chunks (chunk.go) of up to chunkRows rows: one
//     table row per chunk, its first and last keys, its own dictionary of
//     names and its rows a column at a time. Sealed chunks follow each
//     other in key order; the few small ones (sealed = 0), the latest
//     batches', come after every sealed one;
//   - clients and labels (upstreams and lists) are dictionaries;
//   - minutes and seen are counters the writer keeps per minute, so that
//     the timeline, the client and upstream top lists and the client
//     filter read a few thousand counters instead of millions of rows.
var schema = []string{
	`PRAGMA auto_vacuum = INCREMENTAL`, // before the first table: pages freed by retention are given back
	`CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID`,
	`CREATE TABLE clients (id INTEGER PRIMARY KEY, addr TEXT NOT NULL, name TEXT NOT NULL, UNIQUE (addr, name))`,
	`CREATE TABLE labels (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE)`,
	// The blobs last: a scan of the keys reads no overflow page.
	`CREATE TABLE chunks (id INTEGER PRIMARY KEY, first INTEGER NOT NULL, last INTEGER NOT NULL,
		n INTEGER NOT NULL, sealed INTEGER NOT NULL, names BLOB NOT NULL, cols BLOB NOT NULL)`,
	`CREATE TABLE minutes (minute INTEGER NOT NULL, outcome INTEGER NOT NULL, n INTEGER NOT NULL,
		PRIMARY KEY (minute, outcome)) WITHOUT ROWID`,
	`CREATE TABLE seen (what INTEGER NOT NULL, key INTEGER NOT NULL, minute INTEGER NOT NULL, n INTEGER NOT NULL,
		PRIMARY KEY (what, key, minute)) WITHOUT ROWID`,
	`PRAGMA application_id = ` + strconv.Itoa(applicationID),
	`PRAGMA user_version = ` + strconv.Itoa(schemaVersion),
}

// What the seen table counts.
const (
	seenClient   = 0 // seen: clients, by minute
	seenUpstream = 1 // seen: upstreams (labels), by minute
	seenList     = 2 // seen: lists (labels), by minute
)

// epochBefore places a new database's epoch (key 0) this long before its
// creation: rows stamped a little in the past (a clock set back, a
// restored backup's last days) keep small positive keys. Keys fit
// SQLite's 6-byte varint for 51 days after the epoch, 7 bytes after.
const epochBefore = 30 * 24 * time.Hour

// ErrUnavailable is returned by Open when the database file cannot be
// opened (permissions, a lock held by another process): it is left as it
// is, and history stays off.
var ErrUnavailable = errors.New("history: database unavailable")

// errDamaged says that a file opened but is not nxdnsd's history database,
// or failed its integrity check.
var errDamaged = errors.New("history: database damaged")

// sqliteStore is the store in SQLite. Two pools: w, one connection owned
// by the writer goroutine; r, the readers' (WAL lets them read while it
// writes).
type sqliteStore struct {
	w, r  *sql.DB
	conn  *sql.Conn // w's one connection, held by the writer for good
	ck    *checkpointer
	epoch int64 // unix µs of key 0
	mem   bool

	// Owned by the writer goroutine.
	wr *writer

	index chunkIndex // the sealed chunks' heads, for the reads
	roll  rollups    // the top lists' and the timeline's counts by hour

	path         string
	chunk        int          // rows deleted per maintain call: deleteChunk (tests make it small)
	rowsPerChunk int          // rows of a sealed chunk at most: chunkRows (tests make it small)
	bytes        atomic.Int64 // the size at the last write or maintain
	inUse        atomic.Int64 // the bytes of pages in use then
}

var memSeq atomic.Int64

// openSQLite opens (creating when missing) the database at path, "" for
// one in memory. It returns errDamaged for a file that opens but is not a
// history database or fails its integrity check, ErrUnavailable (wrapped)
// for one that cannot be opened.
func openSQLite(path string) (*sqliteStore, error) {
	var dsnW, dsnR, dsnC string
	s := &sqliteStore{chunk: deleteChunk, rowsPerChunk: chunkRows}
	if path == "" {
		// memdb: one database shared by every connection naming it, gone
		// when the last closes.
		name := fmt.Sprintf("file:/nxdnsd-history-%d-%d?vfs=memdb", os.Getpid(), memSeq.Add(1))
		// memdb has no write-ahead log: a read waits for the batch being
		// written, and a commit for the reads in progress (an in-memory
		// history is at most 32 MiB, so both are short: milliseconds; the
		// bound is for a machine as slow as the race detector makes it).
		// Its pages are in memory already: a page cache of 256 KiB a
		// connection, not SQLite's 2 MiB (TestCacheFlood with the history
		// on, 20 s: peak RSS 89.5 MiB, 115.5 with the default).
		dsnW, dsnR = name+"&_pragma=busy_timeout(10000)&_pragma=cache_size(-256)", name+"&_pragma=busy_timeout(10000)&_pragma=cache_size(-256)"
		s.mem = true
	} else {
		s.path = path
		base := "file:" + (&url.URL{Path: path}).EscapedPath()
		pragmas := "_pragma=busy_timeout(250)&_pragma=synchronous(NORMAL)&_pragma=temp_store(MEMORY)"
		// Page caches of 2 MiB for the writer, 1 MiB for each reader:
		// the history's memory stays a few MiB whatever the file's size.
		// The writer never checkpoints (wal_autocheckpoint 0): a
		// checkpoint syncs the file, which can take a second on a busy
		// disk, and rows would be dropped meanwhile. The checkpointer
		// does it on a connection of its own (checkpoint.go).
		dsnW = base + "?" + pragmas + "&_pragma=cache_size(-2048)&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(4194304)"
		dsnR = base + "?mode=ro&" + pragmas + "&_pragma=cache_size(-1024)"
		dsnC = base + "?" + pragmas + "&_pragma=cache_size(-64)"
	}
	w, err := sql.Open("sqlite", dsnW)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	s.w = w
	conn, err := w.Conn(context.Background())
	if err != nil {
		w.Close()
		return nil, classify(err)
	}
	s.conn = conn
	if err := s.init(); err != nil {
		conn.Close()
		w.Close()
		return nil, classify(err)
	}
	r, err := sql.Open("sqlite", dsnR)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	r.SetMaxOpenConns(2)
	r.SetMaxIdleConns(2)
	s.r = r
	if err := r.Ping(); err != nil {
		s.close()
		return nil, classify(err)
	}
	wr, err := newWriter(s)
	if err != nil {
		s.close()
		return nil, classify(err)
	}
	s.wr = wr
	if dsnC != "" {
		if err := s.startCheckpointer(dsnC); err != nil {
			s.close()
			return nil, classify(err)
		}
	}
	s.measure()
	return s, nil
}

// classify maps an error of opening to errDamaged or ErrUnavailable.
func classify(err error) error {
	if errors.Is(err, errDamaged) {
		return err
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_FORMAT:
			return fmt.Errorf("%w: %v", errDamaged, err)
		}
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}

// init checks an existing database or creates the schema in a new one.
func (s *sqliteStore) init() error {
	ctx := context.Background()
	db := s.conn
	// Take the write lock at once: a file another process holds is
	// unavailable, not damaged.
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&tables); err != nil {
		return err
	}
	if tables == 0 {
		for _, stmt := range append(schema, `PRAGMA journal_mode = WAL`) {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("creating the schema: %w", err)
			}
		}
		// On an hour, so that the minutes and hours of keys are those of
		// the clock.
		s.epoch = time.Now().Add(-epochBefore).Truncate(time.Hour).UnixMicro()
		if _, err := db.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('epoch', ?)`, s.epoch); err != nil {
			return err
		}
		return s.markClean(0)
	}
	var app, ver int
	if err := db.QueryRowContext(ctx, `PRAGMA application_id`).Scan(&app); err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&ver); err != nil {
		return err
	}
	if app != applicationID || ver != schemaVersion {
		return fmt.Errorf("%w: not an nxdnsd history of schema %d (application_id %#x, user_version %d)", errDamaged, schemaVersion, app, ver)
	}
	// The full check reads every page (seconds per hundred MiB on a
	// Raspberry Pi): it runs after a crash or power loss, when damage is
	// likely. In a file closed cleanly SQLite finds what it reads damaged
	// (a file cut short: at once) and the writer logs it.
	var clean int64
	_ = db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'clean'`).Scan(&clean)
	if clean != 1 {
		if err := quickCheck(ctx, db); err != nil {
			return err
		}
	}
	if err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'epoch'`).Scan(&s.epoch); err != nil {
		return fmt.Errorf("%w: no epoch: %v", errDamaged, err)
	}
	// A write, so that a file another process holds locked is found now.
	if _, err := db.ExecContext(ctx, `PRAGMA journal_mode = WAL`); err != nil {
		return err
	}
	return s.markClean(0)
}

// markClean records whether the database was closed cleanly (1) or is
// open (0).
func (s *sqliteStore) markClean(v int) error {
	_, err := s.conn.ExecContext(context.Background(), `INSERT INTO meta (key, value) VALUES ('clean', ?) ON CONFLICT DO UPDATE SET value = excluded.value`, v)
	return err
}

// quickCheck runs SQLite's quick_check: every page read, the b-trees'
// structure checked.
func quickCheck(ctx context.Context, db *sql.Conn) error {
	var problems []string
	rows, err := db.QueryContext(ctx, `PRAGMA quick_check`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" && len(problems) < 3 {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: integrity check: %s", errDamaged, strings.Join(problems, "; "))
	}
	return nil
}

// key is t as a row key: microseconds since the epoch.
func (s *sqliteStore) key(t time.Time) int64 { return t.UnixMicro() - s.epoch }

func (s *sqliteStore) time(key int64) time.Time { return time.UnixMicro(s.epoch + key).UTC() }

// measure reads the database's size, its write-ahead log included, and
// the bytes of its pages in use.
func (s *sqliteStore) measure() {
	var pages, free, size int64
	err := s.conn.QueryRowContext(context.Background(), `SELECT p.page_count, f.freelist_count, s.page_size FROM pragma_page_count() p, pragma_freelist_count() f, pragma_page_size() s`).Scan(&pages, &free, &size)
	if err != nil {
		return
	}
	total := pages * size
	if s.path != "" {
		if fi, err := os.Stat(s.path + "-wal"); err == nil {
			total += fi.Size()
		}
	}
	s.bytes.Store(total)
	s.inUse.Store((pages - free) * size)
}

func (s *sqliteStore) size() int64 { return s.bytes.Load() }
func (s *sqliteStore) used() int64 { return s.inUse.Load() }

func (s *sqliteStore) close() error {
	var errs []error
	if s.ck != nil {
		errs = append(errs, s.ck.stop())
	}
	if s.wr != nil {
		errs = append(errs, s.wr.close())
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	if !s.mem {
		// Fold the write-ahead log into the file, so that it is whole
		// without its -wal beside it, and say it was closed cleanly.
		_, err := s.conn.ExecContext(context.Background(), `PRAGMA wal_checkpoint(TRUNCATE)`)
		errs = append(errs, err)
		if err == nil {
			errs = append(errs, s.markClean(1))
		}
		_, err = s.conn.ExecContext(context.Background(), `PRAGMA wal_checkpoint(TRUNCATE)`)
		errs = append(errs, err)
	}
	errs = append(errs, s.conn.Close(), s.w.Close())
	return errors.Join(errs...)
}

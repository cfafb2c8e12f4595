package history

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"
)

// Bounds of one maintain call, so that the write lock it takes is short
// (tens of milliseconds on a Raspberry Pi) and rows keep flowing between
// calls.
const (
	deleteChunk = 20000 // rows deleted per call
	sweepChunk  = 5000  // dictionary ids checked per call
	vacuumChunk = 2048  // pages given back per call (8 MiB)
)

// Size water marks of max_mib: past high, the oldest rows go until the
// pages in use are under low, so that a database at its bound is not
// trimmed after every batch.
const (
	highWater = 0.95
	lowWater  = 0.85
)

// maintain deletes, oldest first and one chunk per call, the rows before
// cutoff, then as many as keep the pages in use under maxBytes; it then
// drops the counters no row is left for, sweeps the dictionaries of
// entries no row refers to, and gives free pages back to the file system
// (incremental vacuum) when they are a large share of it.
func (s *sqliteStore) maintain(cutoff time.Time, maxBytes int64) (more bool, err error) {
	ctx := context.Background()
	wr := s.wr
	if wr.sweeping {
		// Before the next chunk: the dictionaries' share of the size
		// counts toward max_mib too.
		done, err := s.sweep(ctx)
		if err != nil {
			return false, err
		}
		wr.sweeping = !done
		s.measure()
		return true, nil
	}
	deleted, err := s.trim(ctx, s.key(cutoff), maxBytes)
	if err != nil {
		return false, err
	}
	if deleted {
		wr.sweepFrom = [3]int64{0, 0, 0}
		wr.sweeping = true
		if err := s.dropCounters(ctx); err != nil {
			return false, err
		}
		s.measure()
		return true, nil
	}
	vacuumed, err := s.vacuum(ctx, maxBytes)
	s.measure()
	return vacuumed, err
}

// trim deletes one chunk of rows: the oldest before cutoffKey, else the
// oldest while the pages in use are past the high water mark.
func (s *sqliteStore) trim(ctx context.Context, cutoffKey, maxBytes int64) (bool, error) {
	var oldest int64
	err := s.conn.QueryRowContext(ctx, `SELECT id FROM q ORDER BY id LIMIT 1`).Scan(&oldest)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	bound := cutoffKey // delete id < bound
	if oldest >= cutoffKey {
		used, err := s.usedNow(ctx)
		if err != nil {
			return false, err
		}
		limit := float64(maxBytes)
		if s.wr.trimming {
			limit *= lowWater
		} else {
			limit *= highWater
		}
		s.wr.trimming = float64(used) > limit
		if !s.wr.trimming {
			return false, nil
		}
		// A twentieth of the time the rows span at most, so that a small
		// table loses a little at a time too.
		var newest int64
		if err := s.conn.QueryRowContext(ctx, `SELECT max(id) FROM q`).Scan(&newest); err != nil {
			return false, err
		}
		bound = oldest + max(1, (newest-oldest)/20)
	}
	var b int64
	err = s.conn.QueryRowContext(ctx, `SELECT id FROM q WHERE id < ? ORDER BY id LIMIT 1 OFFSET ?`, bound, s.chunk).Scan(&b)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return false, err
	default:
		bound = b
	}
	tx, err := s.begin()
	if err != nil {
		return false, err
	}
	defer tx.rollback()
	if _, err := s.conn.ExecContext(ctx, `DELETE FROM q WHERE id < ?`, bound); err != nil {
		return false, err
	}
	return true, tx.commit()
}

// usedNow is the bytes of the database's pages in use: the file less its
// free pages.
func (s *sqliteStore) usedNow(ctx context.Context) (int64, error) {
	var pages, free, size int64
	if err := s.conn.QueryRowContext(ctx, `SELECT p.page_count, f.freelist_count, s.page_size FROM pragma_page_count() p, pragma_freelist_count() f, pragma_page_size() s`).Scan(&pages, &free, &size); err != nil {
		return 0, err
	}
	return (pages - free) * size, nil
}

// dropCounters deletes the counters of the minutes and hours before the
// oldest row's. The bucket the oldest row is in may still count rows
// deleted from it; the reads start at the oldest row, so they take that
// bucket from the rows themselves.
func (s *sqliteStore) dropCounters(ctx context.Context) error {
	var oldest sql.NullInt64
	if err := s.conn.QueryRowContext(ctx, `SELECT min(id) FROM q`).Scan(&oldest); err != nil {
		return err
	}
	if !oldest.Valid {
		oldest.Int64 = 1 << 62
	}
	minute, hour := floorDiv(oldest.Int64, usPerMinute), floorDiv(oldest.Int64, usPerHour)
	tx, err := s.begin()
	if err != nil {
		return err
	}
	defer tx.rollback()
	for _, st := range []struct {
		sql string
		arg int64
	}{
		{`DELETE FROM minutes WHERE minute < ?`, minute},
		{`DELETE FROM tops WHERE what = 0 AND hour < ?`, hour},
		{`DELETE FROM tops WHERE what = 1 AND hour < ?`, hour},
		{`DELETE FROM seen WHERE minute < ?`, minute},
	} {
		if _, err := s.conn.ExecContext(ctx, st.sql, st.arg); err != nil {
			return err
		}
	}
	return tx.commit()
}

// sweep deletes, sweepChunk ids of each dictionary at a time, the entries
// no row refers to (a name) or no counter (a client, an upstream, a
// list). It reports whether every dictionary has been swept.
func (s *sqliteStore) sweep(ctx context.Context) (done bool, err error) {
	wr := s.wr
	tables := [3]struct{ max, del string }{
		{`SELECT coalesce(max(id), 0) FROM names`,
			`DELETE FROM names WHERE id >= ?1 AND id < ?2 AND NOT EXISTS (SELECT 1 FROM q WHERE q.name = names.id)`},
		{`SELECT coalesce(max(id), 0) FROM clients`,
			`DELETE FROM clients WHERE id >= ?1 AND id < ?2 AND NOT EXISTS (SELECT 1 FROM seen WHERE what = 0 AND key = clients.id)`},
		{`SELECT coalesce(max(id), 0) FROM labels`,
			`DELETE FROM labels WHERE id >= ?1 AND id < ?2 AND NOT EXISTS (SELECT 1 FROM seen WHERE what IN (1, 2) AND key = labels.id)`},
	}
	tx, err := s.begin()
	if err != nil {
		return false, err
	}
	defer tx.rollback()
	done = true
	for i, t := range tables {
		var top int64
		if err := s.conn.QueryRowContext(ctx, t.max).Scan(&top); err != nil {
			return false, err
		}
		from := wr.sweepFrom[i]
		if from > top {
			continue
		}
		if _, err := s.conn.ExecContext(ctx, t.del, from, from+sweepChunk); err != nil {
			return false, err
		}
		wr.sweepFrom[i] = from + sweepChunk
		done = done && from+sweepChunk > top
	}
	wr.forget()
	return done, tx.commit()
}

// vacuum gives free pages back when they are more than an eighth of
// maxBytes, a chunk at a time. Freed pages are reused by new rows first;
// this is for a database that shrank (a lower max_mib, a quieter network).
func (s *sqliteStore) vacuum(ctx context.Context, maxBytes int64) (bool, error) {
	var free, size int64
	if err := s.conn.QueryRowContext(ctx, `SELECT f.freelist_count, s.page_size FROM pragma_freelist_count() f, pragma_page_size() s`).Scan(&free, &size); err != nil {
		return false, err
	}
	if free*size <= maxBytes/8 {
		return false, nil
	}
	if _, err := s.conn.ExecContext(ctx, `PRAGMA incremental_vacuum(`+strconv.Itoa(vacuumChunk)+`)`); err != nil {
		return false, err
	}
	return true, nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

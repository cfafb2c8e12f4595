package history

import (
	"context"
	"database/sql"
	"slices"
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
	if wr.sweeping && float64(s.used()) <= float64(maxBytes)*highWater {
		// Before the next chunk, unless rows must go first: the
		// dictionaries (clients, labels) are small.
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
		wr.sweepFrom = [2]int64{}
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

// trim deletes the oldest rows, about s.chunk of them at most (whole
// chunks; a chunk that holds rows on both sides of the bound is written
// again without the old ones): those before cutoffKey, else the oldest
// twentieth of the time the rows span while the pages in use are past the
// high water mark.
func (s *sqliteStore) trim(ctx context.Context, cutoffKey, maxBytes int64) (bool, error) {
	wr := s.wr
	var oldest sql.NullInt64
	if err := s.conn.QueryRowContext(ctx, `SELECT min(first) FROM chunks`).Scan(&oldest); err != nil {
		return false, err
	}
	if !oldest.Valid {
		return false, nil
	}
	if oldest.Int64 >= cutoffKey {
		used, err := s.usedNow(ctx)
		if err != nil {
			return false, err
		}
		limit := float64(maxBytes)
		if wr.trimming {
			limit *= lowWater
		} else {
			limit *= highWater
		}
		wr.trimming = float64(used) > limit
		if !wr.trimming {
			return false, nil
		}
		// The share of the time the rows span that brings the pages in
		// use under the low water mark, a twentieth at least so that a
		// history at its bound is not trimmed after every batch (and at
		// most s.chunk rows a call, below).
		var newest int64
		if err := s.conn.QueryRowContext(ctx, `SELECT max(last) FROM chunks`).Scan(&newest); err != nil {
			return false, err
		}
		share := max(1.0/20, (float64(used)-float64(maxBytes)*lowWater)/float64(used))
		cutoffKey = oldest.Int64 + max(1, int64(float64(newest-oldest.Int64)*share))
	}
	// Rows to go in the small chunks: seal them first, so that only
	// sealed chunks are deleted or cut.
	var small sql.NullInt64
	if err := s.conn.QueryRowContext(ctx, `SELECT min(first) FROM chunks WHERE sealed = 0`).Scan(&small); err != nil {
		return false, err
	}
	if small.Valid && small.Int64 < cutoffKey {
		if err := wr.seal(); err != nil {
			return false, err
		}
	}
	rows, err := s.conn.QueryContext(ctx, `SELECT id, first, last, n FROM chunks WHERE sealed = 1 ORDER BY id LIMIT 64`)
	if err != nil {
		return false, err
	}
	type head struct{ id, first, last, n int64 }
	var heads []head
	for rows.Next() {
		var h head
		if err := rows.Scan(&h.id, &h.first, &h.last, &h.n); err != nil {
			rows.Close()
			return false, err
		}
		heads = append(heads, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	tx, err := s.begin()
	if err != nil {
		return false, err
	}
	defer tx.rollback()
	deleted := int64(0)
	for _, h := range heads {
		if deleted >= int64(s.chunk) {
			break
		}
		if h.first >= cutoffKey {
			break
		}
		if h.last < cutoffKey {
			if _, err := s.conn.ExecContext(ctx, `DELETE FROM chunks WHERE id = ?`, h.id); err != nil {
				return false, err
			}
			deleted += h.n
			continue
		}
		// Both sides of the cutoff: the chunk again, with the new rows.
		if err := s.cut(ctx, h.id, cutoffKey); err != nil {
			return false, err
		}
		deleted++
		break
	}
	if deleted == 0 {
		return false, nil
	}
	return true, tx.commit()
}

// cut writes chunk id again with its rows from cutoffKey on, in the
// transaction of trim.
func (s *sqliteStore) cut(ctx context.Context, id, cutoffKey int64) error {
	var first int64
	var names, cols []byte
	if err := s.conn.QueryRowContext(ctx, `SELECT first, names, cols FROM chunks WHERE id = ?`, id).Scan(&first, &names, &cols); err != nil {
		return err
	}
	var c chunk
	if err := c.parse(first, names, cols); err != nil {
		return err
	}
	all, err := c.rows(nil)
	if err != nil {
		return err
	}
	i, _ := slices.BinarySearchFunc(all, cutoffKey, func(r chunkRow, k int64) int { return cmpKey(r.key, k) })
	keep := all[i:]
	if len(keep) == 0 {
		_, err := s.conn.ExecContext(ctx, `DELETE FROM chunks WHERE id = ?`, id)
		return err
	}
	nb, cb := s.wr.enc.encode(keep)
	_, err = s.conn.ExecContext(ctx, `UPDATE chunks SET first = ?, n = ?, names = ?, cols = ? WHERE id = ?`,
		keep[0].key, len(keep), nb, cb, id)
	return err
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
	if err := s.conn.QueryRowContext(ctx, `SELECT min(first) FROM chunks`).Scan(&oldest); err != nil {
		return err
	}
	if !oldest.Valid {
		oldest.Int64 = 1 << 62
	}
	minute := floorDiv(oldest.Int64, usPerMinute)
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
		{`DELETE FROM seen WHERE minute < ?`, minute},
	} {
		if _, err := s.conn.ExecContext(ctx, st.sql, st.arg); err != nil {
			return err
		}
	}
	return tx.commit()
}

// sweep deletes, sweepChunk ids of each dictionary at a time, the
// entries no counter refers to (a client, an upstream, a list): the
// rows' minutes are in seen. It reports whether every dictionary has been
// swept. Names need no sweep: each chunk holds its own.
func (s *sqliteStore) sweep(ctx context.Context) (done bool, err error) {
	wr := s.wr
	tables := [2]struct{ max, del string }{
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

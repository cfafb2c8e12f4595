package history

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
)

// chunkIndex keeps the sealed chunks' heads in memory, in key order, so
// that a read finds the chunks of a range by a binary search: the chunks
// table has no index on keys, and a scan of it reads a page per chunk
// (2 ms for the 1,221 chunks of 10,000,000 rows, on every read).
//
// It follows the table cheaply, by rowid: sealed chunks are added in key
// order with ids above every other chunk's (a seal deletes the small
// chunks first), so the new ones are those after the newest it knows;
// retention deletes the oldest and cuts the one on its cutoff, so the old
// end is the table's first sealed row. The small chunks, at most
// maxSmalls, come after the newest sealed one and are read each time.
//
// mu is held over a load's queries (two seeks by rowid and the chunks
// after the newest known): two loads at once would append the same new
// chunks twice.
type chunkIndex struct {
	mu     sync.Mutex  // guards following
	sealed []chunkHead // ascending ids and keys; elements never change in place (snapshots share the array)
}

// chunkSnap is the chunks as one load found them.
type chunkSnap struct {
	sealed []chunkHead // ascending ids and keys
	smalls []chunkHead // ascending ids
}

// oldest is the key of the oldest row, or 1<<62 when there is none.
func (c *chunkSnap) oldest() int64 {
	if len(c.sealed) > 0 {
		return c.sealed[0].first
	}
	k := int64(1 << 62)
	for _, h := range c.smalls {
		k = min(k, h.first)
	}
	return k
}

// newest is the newest sealed chunk; id 0 when there is none.
func (c *chunkSnap) newest() chunkHead {
	if len(c.sealed) == 0 {
		return chunkHead{last: -1 << 62}
	}
	return c.sealed[len(c.sealed)-1]
}

// closed reports whether hour h can get no new row: every row of the
// store after it is sealed past its end.
func (c *chunkSnap) closed(h int64) bool { return c.newest().last >= (h+1)*usPerHour-1 }

// overlapping returns the sealed heads that may hold keys in [lo, hi),
// ascending.
func (c *chunkSnap) overlapping(lo, hi int64) []chunkHead {
	i, _ := slices.BinarySearchFunc(c.sealed, lo, func(h chunkHead, k int64) int { return cmpKey(h.last, k) })
	j := i
	for j < len(c.sealed) && c.sealed[j].first < hi {
		j++
	}
	return c.sealed[i:j]
}

// load brings the index up to date and returns the chunks.
func (x *chunkIndex) load(ctx context.Context, db *sql.DB) (chunkSnap, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	snap, ok, err := x.loadAfter(ctx, db)
	if err != nil {
		return chunkSnap{}, err
	}
	if !ok {
		// The newest it knew is gone or changed (retention reached it):
		// all again.
		x.sealed = nil
		if snap, _, err = x.loadAfter(ctx, db); err != nil {
			return chunkSnap{}, err
		}
	}
	// The old end.
	var id, first int64
	err = db.QueryRowContext(ctx, `SELECT id, first FROM chunks WHERE sealed = 1 ORDER BY id LIMIT 1`).Scan(&id, &first)
	if errors.Is(err, sql.ErrNoRows) {
		x.sealed = nil
		snap.sealed = nil
		return snap, nil
	} else if err != nil {
		return chunkSnap{}, err
	}
	s := x.sealed
	i, _ := slices.BinarySearchFunc(s, id, func(h chunkHead, id int64) int { return cmpKey(h.id, id) })
	s = s[i:]
	if len(s) > 0 && s[0].id == id && s[0].first != first {
		s = slices.Clone(s)
		s[0].first = first
	}
	x.sealed = s
	snap.sealed = s
	return snap, nil
}

// loadAfter appends the sealed chunks after the newest known and reads
// the small ones; ok is false when the newest known is not as it was.
func (x *chunkIndex) loadAfter(ctx context.Context, db *sql.DB) (snap chunkSnap, ok bool, err error) {
	var known *chunkHead
	after := int64(0)
	if n := len(x.sealed); n > 0 {
		known = &x.sealed[n-1]
		after = known.id
	}
	rows, err := db.QueryContext(ctx, `SELECT id, first, last, sealed FROM chunks WHERE id >= ? ORDER BY id`, after)
	if err != nil {
		return chunkSnap{}, false, err
	}
	defer rows.Close()
	ok = known == nil
	var fresh []chunkHead
	for rows.Next() {
		var h chunkHead
		if err := rows.Scan(&h.id, &h.first, &h.last, &h.sealed); err != nil {
			return chunkSnap{}, false, err
		}
		switch {
		case known != nil && h.id == known.id:
			ok = h.sealed && h.last == known.last
		case h.sealed:
			fresh = append(fresh, h)
		default:
			snap.smalls = append(snap.smalls, h)
		}
	}
	if err := rows.Err(); err != nil {
		return chunkSnap{}, false, err
	}
	if !ok {
		return chunkSnap{}, false, nil
	}
	x.sealed = append(x.sealed, fresh...)
	snap.sealed = x.sealed
	return snap, true, nil
}

package history

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// The lists GET /api/stats/top ranks.
const (
	TopDomains   = "domains"   // names asked, blocked ones included
	TopBlocked   = "blocked"   // names blocked
	TopClients   = "clients"   // client addresses
	TopUpstreams = "upstreams" // upstreams (and forward-zone resolvers) that answered
)

// oldest is the key of the oldest row, or 1<<62 when there is none. The
// counters of the bucket it is in may count rows already deleted, so
// reads take that bucket from the rows.
func (s *sqliteStore) oldest(ctx context.Context) (int64, error) {
	var k sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT min(id) FROM q`).Scan(&k); err != nil {
		return 0, err
	}
	if !k.Valid {
		return 1 << 62, nil
	}
	return k.Int64, nil
}

// split cuts [lo, hi) at the boundaries of buckets of g: the head and
// tail that are parts of buckets, read from the rows, and the whole
// buckets [b0, b1) between, read from the counters. b0 == b1 when there
// are none: the whole range is then head.
func split(lo, hi, g int64) (b0, b1 int64) {
	b0 = floorDiv(lo+g-1, g)
	b1 = floorDiv(hi, g)
	if b0 >= b1 {
		return 0, 0
	}
	return b0, b1
}

func (s *sqliteStore) top(ctx context.Context, what, _ string, from, to time.Time, limit int) ([]count, error) {
	oldest, err := s.oldest(ctx)
	if err != nil {
		return nil, err
	}
	lo, hi := max(s.key(from), oldest), s.key(to)
	if lo >= hi {
		return []count{}, nil
	}
	var (
		g                    int64
		raw, counters, label string
		what0                int
	)
	switch what {
	case TopDomains:
		g, what0 = usPerHour, topDomains
		raw = `SELECT name AS key, count(*) AS n FROM q WHERE id >= ? AND id < ? AND name IS NOT NULL GROUP BY name`
		counters = `SELECT key, sum(n) AS n FROM tops WHERE what = ? AND hour >= ? AND hour < ? GROUP BY key`
		label = `SELECT d.name, t.n FROM t JOIN names d ON d.id = t.key ORDER BY t.n DESC, d.name LIMIT ?`
	case TopBlocked:
		g, what0 = usPerHour, topBlocked
		raw = `SELECT name AS key, count(*) AS n FROM q WHERE id >= ? AND id < ? AND name IS NOT NULL AND (flags >> 3) & 15 = 3 GROUP BY name`
		counters = `SELECT key, sum(n) AS n FROM tops WHERE what = ? AND hour >= ? AND hour < ? GROUP BY key`
		label = `SELECT d.name, t.n FROM t JOIN names d ON d.id = t.key ORDER BY t.n DESC, d.name LIMIT ?`
	case TopClients:
		// Ranked by address: one address with several names (a DoH path
		// name, a lease that changed) counts once.
		g, what0 = usPerMinute, seenClient
		raw = `SELECT client AS key, count(*) AS n FROM q WHERE id >= ? AND id < ? GROUP BY client`
		counters = `SELECT key, sum(n) AS n FROM seen WHERE what = ? AND minute >= ? AND minute < ? GROUP BY key`
		label = `SELECT k, sum(t.n) AS c FROM t JOIN (SELECT id, CASE addr WHEN '' THEN name ELSE addr END AS k FROM clients) d ON d.id = t.key GROUP BY k ORDER BY c DESC, k LIMIT ?`
	case TopUpstreams:
		g, what0 = usPerMinute, seenUpstream
		raw = `SELECT upstream AS key, count(*) AS n FROM q WHERE id >= ? AND id < ? AND upstream IS NOT NULL GROUP BY upstream`
		counters = `SELECT key, sum(n) AS n FROM seen WHERE what = ? AND minute >= ? AND minute < ? GROUP BY key`
		label = `SELECT d.text, t.n FROM t JOIN labels d ON d.id = t.key ORDER BY t.n DESC, d.text LIMIT ?`
	default:
		return nil, errors.New("history: unknown top list")
	}
	// The counts are summed, ranked and named in SQLite: its sorter keeps
	// the first limit in bounded memory, where a Go map would hold a
	// day's every name.
	var parts string
	var args []any
	b0, b1 := split(lo, hi, g)
	if b0 == b1 {
		parts, args = raw, []any{lo, hi}
	} else {
		parts = raw + ` UNION ALL ` + counters + ` UNION ALL ` + raw
		args = []any{lo, b0 * g, what0, b0, b1, b1 * g, hi}
	}
	q := `WITH t AS (SELECT key, sum(n) AS n FROM (` + parts + `) GROUP BY key) ` + label
	rows, err := s.r.QueryContext(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []count{}
	for rows.Next() {
		var c count
		if err := rows.Scan(&c.Key, &c.Count); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// MaxBuckets bounds one timeline: a week in minutes.
const MaxBuckets = 10080

func (s *sqliteStore) timeline(ctx context.Context, _ string, from, to time.Time, step time.Duration) ([]bucket, error) {
	st := step.Microseconds()
	fromU, toU := from.UnixMicro(), to.UnixMicro()
	first, last := floorDiv(fromU, st), floorDiv(toU-1, st)
	out := make([]bucket, 0, last-first+1)
	for b := first; b <= last; b++ {
		out = append(out, bucket{Time: time.UnixMicro(b * st).UTC()})
	}
	oldest, err := s.oldest(ctx)
	if err != nil {
		return nil, err
	}
	lo, hi := max(s.key(from), oldest), s.key(to)
	if lo >= hi {
		return out, nil
	}
	// bucket maps a key to its bucket's index in out.
	bucket := func(key int64) int { return int(floorDiv(key+s.epoch, st) - first) }
	rawRows := func(lo, hi int64) error {
		if lo >= hi {
			return nil
		}
		rows, err := s.r.QueryContext(ctx, `SELECT id, flags FROM q WHERE id >= ? AND id < ?`, lo, hi)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k, f int64
			if err := rows.Scan(&k, &f); err != nil {
				return err
			}
			_, src, rcode := unflags(f)
			out[bucket(k)].N[outcome(src, rcode)]++
		}
		return rows.Err()
	}
	b0, b1 := int64(0), int64(0)
	if st%usPerMinute == 0 {
		b0, b1 = split(lo, hi, usPerMinute)
	}
	if b0 == b1 {
		return out, rawRows(lo, hi)
	}
	if err := errors.Join(rawRows(lo, b0*usPerMinute), rawRows(b1*usPerMinute, hi)); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT minute, outcome, n FROM minutes WHERE minute >= ? AND minute < ?`, b0, b1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var m, o, n int64
		if err := rows.Scan(&m, &o, &n); err != nil {
			return nil, err
		}
		if o >= 0 && o < numOutcomes {
			out[bucket(m*usPerMinute)].N[o] += n
		}
	}
	return out, rows.Err()
}

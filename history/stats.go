package history

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
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

type tally map[int64]int64

func (s *sqliteStore) addCounts(ctx context.Context, t tally, q string, args ...any) error {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k, n int64
		if err := rows.Scan(&k, &n); err != nil {
			return err
		}
		t[k] += n
	}
	return rows.Err()
}

func (s *sqliteStore) top(ctx context.Context, what string, from, to time.Time, limit int) ([]Count, error) {
	oldest, err := s.oldest(ctx)
	if err != nil {
		return nil, err
	}
	lo, hi := max(s.key(from), oldest), s.key(to)
	if lo >= hi {
		return []Count{}, nil
	}
	var (
		g             int64
		raw, counters string
		cargs         []any
	)
	switch what {
	case TopDomains:
		g, raw = usPerHour, `SELECT name, count(*) FROM q WHERE id >= ? AND id < ? AND name IS NOT NULL GROUP BY name`
		counters, cargs = `SELECT key, sum(n) FROM tops WHERE what = ? AND hour >= ? AND hour < ? GROUP BY key`, []any{topDomains}
	case TopBlocked:
		g, raw = usPerHour, `SELECT name, count(*) FROM q WHERE id >= ? AND id < ? AND name IS NOT NULL AND (flags >> 3) & 15 = 3 GROUP BY name`
		counters, cargs = `SELECT key, sum(n) FROM tops WHERE what = ? AND hour >= ? AND hour < ? GROUP BY key`, []any{topBlocked}
	case TopClients:
		g, raw = usPerMinute, `SELECT client, count(*) FROM q WHERE id >= ? AND id < ? GROUP BY client`
		counters, cargs = `SELECT key, sum(n) FROM seen WHERE what = ? AND minute >= ? AND minute < ? GROUP BY key`, []any{seenClient}
	case TopUpstreams:
		g, raw = usPerMinute, `SELECT upstream, count(*) FROM q WHERE id >= ? AND id < ? AND upstream IS NOT NULL GROUP BY upstream`
		counters, cargs = `SELECT key, sum(n) FROM seen WHERE what = ? AND minute >= ? AND minute < ? GROUP BY key`, []any{seenUpstream}
	default:
		return nil, errors.New("history: unknown top list")
	}
	t := tally{}
	b0, b1 := split(lo, hi, g)
	if b0 == b1 {
		err = s.addCounts(ctx, t, raw, lo, hi)
	} else {
		err = errors.Join(
			s.addCounts(ctx, t, raw, lo, b0*g),
			s.addCounts(ctx, t, counters, append(cargs, b0, b1)...),
			s.addCounts(ctx, t, raw, b1*g, hi))
	}
	if err != nil {
		return nil, err
	}
	if what != TopClients {
		shortlist(t, limit)
	}
	labels, err := s.labelsOf(ctx, what, t)
	if err != nil {
		return nil, err
	}
	// Clients are ranked by address: one address with several names
	// (a DoH path name, a lease that changed) counts once.
	byKey := map[string]int64{}
	for id, n := range t {
		if l, ok := labels[id]; ok {
			byKey[l] += n
		}
	}
	out := make([]Count, 0, len(byKey))
	for k, n := range byKey {
		out = append(out, Count{Key: k, Count: n})
	}
	slices.SortFunc(out, func(a, b Count) int {
		if a.Count != b.Count {
			if a.Count > b.Count {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// shortlist keeps in t the ids that can be among the first limit: those
// counted at least as often as the limit-th (ties are ordered by their
// text, which is not known yet). A day's one-off names are not looked
// up.
func shortlist(t tally, limit int) {
	if len(t) <= limit {
		return
	}
	ns := make([]int64, 0, len(t))
	for _, n := range t {
		ns = append(ns, n)
	}
	slices.SortFunc(ns, func(a, b int64) int { return cmp.Compare(b, a) })
	least := ns[limit-1]
	for id, n := range t {
		if n < least {
			delete(t, id)
		}
	}
}

// labelsOf looks up the text of every id of t in the dictionary of what,
// a chunk of ids per query.
func (s *sqliteStore) labelsOf(ctx context.Context, what string, t tally) (map[int64]string, error) {
	var q string
	switch what {
	case TopDomains, TopBlocked:
		q = `SELECT id, name FROM names WHERE `
	case TopClients:
		q = `SELECT id, CASE addr WHEN '' THEN name ELSE addr END FROM clients WHERE `
	default:
		q = `SELECT id, text FROM labels WHERE `
	}
	ids := make([]int64, 0, len(t))
	for id := range t {
		ids = append(ids, id)
	}
	out := make(map[int64]string, len(ids))
	const chunk = 500
	for len(ids) > 0 {
		n := min(chunk, len(ids))
		cond, args := inList("id", ids[:n])
		ids = ids[n:]
		rows, err := s.r.QueryContext(ctx, q+cond, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id int64
			var text string
			if err := rows.Scan(&id, &text); err != nil {
				rows.Close()
				return nil, err
			}
			out[id] = text
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MaxBuckets bounds one timeline: a week in minutes.
const MaxBuckets = 10080

func (s *sqliteStore) timeline(ctx context.Context, from, to time.Time, step time.Duration) ([]Bucket, error) {
	st := step.Microseconds()
	fromU, toU := from.UnixMicro(), to.UnixMicro()
	first, last := floorDiv(fromU, st), floorDiv(toU-1, st)
	out := make([]Bucket, 0, last-first+1)
	for b := first; b <= last; b++ {
		out = append(out, Bucket{Time: time.UnixMicro(b * st).UTC()})
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

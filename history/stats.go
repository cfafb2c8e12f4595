package history

import (
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
	snap, err := s.index.load(ctx, s.r)
	if err != nil {
		return 0, err
	}
	return snap.oldest(), nil
}

// eachRow calls fn for every row in [lo, hi), the columns cols decoded
// (the keys always), and end (when not nil) after each chunk's rows: for
// the parts of buckets the counters do not cover.
func (s *sqliteStore) eachRow(ctx context.Context, lo, hi int64, cols []int, fn func(c *chunk, j int), end func(c *chunk)) error {
	if lo >= hi {
		return nil
	}
	heads, err := s.heads(ctx, lo, hi)
	if err != nil {
		return err
	}
	var c chunk
	for _, h := range heads {
		err := s.blobs(ctx, h.id, true, func(nb, cb []byte) (bool, error) {
			if err := c.parse(h.first, nb, cb); err != nil {
				return false, err
			}
			keys, err := c.column(colKey)
			if err != nil {
				return false, err
			}
			for _, i := range cols {
				if _, err := c.column(i); err != nil {
					return false, err
				}
			}
			for j, k := range keys {
				if k >= lo && k < hi {
					fn(&c, j)
				}
			}
			if end != nil {
				end(&c)
			}
			return false, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// maxTopKeys bounds the names a top list counts at once: past it, the
// least asked are dropped, so that a range of millions of one-off names
// costs bounded memory. The top of a list is exact while the range holds
// fewer distinct names.
const maxTopKeys = 1 << 17

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
	switch what {
	case TopDomains, TopBlocked, TopClients, TopUpstreams:
	default:
		return nil, errors.New("history: unknown top list")
	}
	snap, err := s.index.load(ctx, s.r)
	if err != nil {
		return nil, err
	}
	lo, hi := max(s.key(from), snap.oldest()), s.key(to)
	if lo >= hi {
		return []count{}, nil
	}
	if h0, h1 := split(lo, hi, usPerHour); h0 != h1 {
		return s.topRolled(ctx, listOf(what), lo, hi, limit)
	}
	return s.topRows(ctx, what, lo, hi, limit)
}

// topRows counts a top list of [lo, hi) from the rows and the counters
// of minutes.
func (s *sqliteStore) topRows(ctx context.Context, what string, lo, hi int64, limit int) ([]count, error) {
	if what == TopDomains || what == TopBlocked {
		return s.topNames(ctx, what == TopBlocked, lo, hi, limit)
	}
	var err error
	seenWhat, col := seenClient, colClient
	if what == TopUpstreams {
		seenWhat, col = seenUpstream, colUpstream
	}
	// Whole minutes from the counters, their parts from the rows.
	n := map[int64]int64{}
	raw := func(lo, hi int64) error {
		return s.eachRow(ctx, lo, hi, []int{col}, func(c *chunk, j int) {
			v := c.vals[col][j]
			if col == colUpstream {
				if v == 0 {
					return
				}
				v--
			}
			n[v]++
		}, nil)
	}
	b0, b1 := split(lo, hi, usPerMinute)
	if b0 == b1 {
		err = raw(lo, hi)
	} else {
		err = errors.Join(raw(lo, b0*usPerMinute), raw(b1*usPerMinute, hi))
	}
	if err != nil {
		return nil, err
	}
	if b0 != b1 {
		rows, err := s.r.QueryContext(ctx, `SELECT key, sum(n) FROM seen WHERE what = ? AND minute >= ? AND minute < ? GROUP BY key`, seenWhat, b0, b1)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var k, c int64
			if err := rows.Scan(&k, &c); err != nil {
				rows.Close()
				return nil, err
			}
			n[k] += c
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	ids := make([]int64, 0, len(n))
	for id := range n {
		ids = append(ids, id)
	}
	byKey := map[string]int64{}
	if what == TopClients {
		// Ranked by address: one address with several names (a DoH path
		// name, a lease that changed) counts once.
		err = s.each(ctx, `SELECT id, CASE addr WHEN '' THEN name ELSE addr END FROM clients WHERE id IN `, ids, func(rows *sql.Rows) error {
			var id int64
			var k string
			err := rows.Scan(&id, &k)
			byKey[k] += n[id]
			return err
		})
	} else {
		err = s.each(ctx, `SELECT id, text FROM labels WHERE id IN `, ids, func(rows *sql.Rows) error {
			var id int64
			var k string
			err := rows.Scan(&id, &k)
			byKey[k] += n[id]
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	return ranked(byKey, limit), nil
}

// topNames counts the names asked (or blocked) in [lo, hi) from the
// chunks: each chunk's names once, counted by their index.
func (s *sqliteStore) topNames(ctx context.Context, blocked bool, lo, hi int64, limit int) ([]count, error) {
	byName := map[string]int64{}
	var local []int64 // the chunk's counts, by its names' index
	end := func(c *chunk) {
		for i, k := range local {
			if k == 0 {
				continue
			}
			b := c.nameBytes(int64(i))
			if _, ok := byName[string(b)]; ok {
				byName[string(b)] += k
			} else {
				byName[string(b)] = k
			}
		}
		clear(local)
		if len(byName) > 2*maxTopKeys {
			prune(byName, maxTopKeys)
		}
	}
	cols := []int{colName}
	if blocked {
		cols = append(cols, colFlags)
	}
	err := s.eachRow(ctx, lo, hi, cols, func(c *chunk, j int) {
		if blocked {
			if _, src, _ := unflags(c.vals[colFlags][j]); src != srcBlocked {
				return
			}
		}
		v := c.vals[colName][j]
		if v == 0 {
			return
		}
		for int(v) >= len(local) {
			local = append(local, 0)
		}
		local[v]++
	}, end)
	if err != nil {
		return nil, err
	}
	return ranked(byName, limit), nil
}

// prune keeps the keep most counted entries of m.
func prune(m map[string]int64, keep int) {
	counts := make([]int64, 0, len(m))
	for _, n := range m {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	floor := counts[len(counts)-keep]
	for k, n := range m {
		if n < floor {
			delete(m, k)
		}
	}
}

// ranked is the limit most counted keys of m, the most first, ties by key.
func ranked(m map[string]int64, limit int) []count {
	out := make([]count, 0, len(m))
	for k, n := range m {
		out = append(out, count{Key: k, Count: n})
	}
	slices.SortFunc(out, func(a, b count) int {
		if a.Count != b.Count {
			return cmpKey(b.Count, a.Count)
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out[:min(len(out), limit)]
}

var srcBlocked = sourceCode("blocked")

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
	snap, err := s.index.load(ctx, s.r)
	if err != nil {
		return nil, err
	}
	oldest := snap.oldest()
	lo, hi := max(s.key(from), oldest), s.key(to)
	if lo >= hi {
		return out, nil
	}
	// bucket maps a key to its bucket's index in out.
	bucket := func(key int64) int { return int(floorDiv(key+s.epoch, st) - first) }
	rawRows := func(lo, hi int64) error {
		return s.eachRow(ctx, lo, hi, []int{colFlags}, func(c *chunk, j int) {
			_, src, rcode := unflags(c.vals[colFlags][j])
			out[bucket(c.vals[colKey][j])].N[outcome(src, rcode)]++
		}, nil)
	}
	b0, b1 := int64(0), int64(0)
	if st%usPerMinute == 0 {
		b0, b1 = split(lo, hi, usPerMinute)
	}
	if b0 == b1 {
		return out, rawRows(lo, hi)
	}
	add := func(m, o, n int64) { out[bucket(m*usPerMinute)].N[o] += n }
	return out, s.minutesRolled(ctx, lo, hi, add, rawRows)
}

// minutesCounted calls add for each outcome of each minute in [m0, m1)
// that the counters of minutes hold.
func (s *sqliteStore) minutesCounted(ctx context.Context, m0, m1 int64, add func(m, o, n int64)) error {
	rows, err := s.r.QueryContext(ctx, `SELECT minute, outcome, n FROM minutes WHERE minute >= ? AND minute < ?`, m0, m1)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var m, o, n int64
		if err := rows.Scan(&m, &o, &n); err != nil {
			return err
		}
		if o >= 0 && o < numOutcomes {
			add(m, o, n)
		}
	}
	return rows.Err()
}

package history

import (
	"context"
	"database/sql"
	"math"
)

// counts are rows counted exactly: names by their text; clients and
// upstreams by their ids in clients and labels (keys, their text, filled
// when asked for); rows by minute of their hour and outcome.
type counts struct {
	names   [2]map[string]int64 // domains, blocked
	ids     [2]map[int64]int64  // clients, upstreams
	keys    [2]map[int64]string // the ids' text, as far as looked up
	minutes [60][numOutcomes]int64
	last    int64 // the newest key counted
	pruned  bool  // names were left out: more than maxTopKeys distinct

	views [numLists]*view // as merges add them up; nil: to be made again
}

// view is a list of counts as a merge adds it up: the keys the key table
// has by their ids, the others by their text. It is made again when the
// counts change or the table gets new keys (a key counted by text in
// one place and by id in another would be ranked twice).
type view struct {
	gen  uint64
	ids  []idCount
	text []count
}

type idCount struct {
	key uint32
	n   int64
}

// view returns c's view of list.
func (c *counts) view(list int, t *keyTable) *view {
	if v := c.views[list]; v != nil && v.gen == t.gen {
		return v
	}
	v := &view{gen: t.gen}
	c.each(list, func(k string, n int64) {
		if id, ok := t.ids[k]; ok {
			v.ids = append(v.ids, idCount{id, n})
		} else {
			v.text = append(v.text, count{k, n})
		}
	})
	c.views[list] = v
	return v
}

func newCounts() *counts {
	c := &counts{last: -1 << 62}
	for i := range 2 {
		c.names[i] = map[string]int64{}
		c.ids[i] = map[int64]int64{}
		c.keys[i] = map[int64]string{}
	}
	return c
}

// add adds o's counts to c's.
func (c *counts) add(o *counts) {
	for l := range 2 {
		for k, n := range o.names[l] {
			c.names[l][k] += n
		}
		c.bound(l)
		for id, n := range o.ids[l] {
			c.ids[l][id] += n
		}
		for id, k := range o.keys[l] {
			c.keys[l][id] = k
		}
	}
	for m := range c.minutes {
		for x, n := range o.minutes[m] {
			c.minutes[m][x] += n
		}
	}
	c.last = max(c.last, o.last)
	c.pruned = c.pruned || o.pruned
	c.views = [numLists]*view{}
}

func (c *counts) addName(list int, b []byte, n int64) {
	m := c.names[list]
	if _, ok := m[string(b)]; ok {
		m[string(b)] += n
	} else {
		m[string(b)] = n
	}
	c.bound(list)
}

// bound keeps list's names to maxTopKeys when they are twice as many.
func (c *counts) bound(list int) {
	if m := c.names[list]; len(m) > 2*maxTopKeys {
		prune(m, maxTopKeys)
		c.pruned = true
	}
}

// countRows counts the rows of heads in [lo, hi), each into the counts
// at gives for its hour (nil: not counted).
func (s *sqliteStore) countRows(ctx context.Context, heads []chunkHead, lo, hi int64, at func(hour int64) *counts) error {
	var c chunk
	var t tallier
	for _, h := range heads {
		if h.first >= hi || h.last < lo {
			continue
		}
		err := s.blobs(ctx, h.id, true, func(nb, cb []byte) (bool, error) {
			if err := c.parse(h.first, nb, cb); err != nil {
				return false, err
			}
			return false, t.rows(&c, 0, lo, hi, at)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// tallierCols are the columns a tallier reads.
var tallierCols = [...]int{colKey, colName, colClient, colFlags, colUpstream}

// tallier counts the rows of chunks, its buffers reused.
type tallier struct {
	local [2][]int64 // the chunk's names' counts, by their index: domains, blocked
}

// rows counts chunk c's rows from row j0 on in [lo, hi) into the counts
// at gives for their hour.
func (t *tallier) rows(c *chunk, j0 int, lo, hi int64, at func(hour int64) *counts) error {
	var cols [numCols][]int64
	for _, i := range tallierCols {
		v, err := c.column(i)
		if err != nil {
			return err
		}
		cols[i] = v
	}
	var cur *counts
	flush := func() {
		if cur != nil {
			for l := range t.local {
				for i, n := range t.local[l] {
					if n != 0 {
						cur.addName(l, c.nameBytes(int64(i)), n)
					}
				}
			}
			cur.views = [numLists]*view{}
		}
		clear(t.local[0])
		clear(t.local[1])
	}
	hour := int64(math.MinInt64)
	for j := j0; j < len(cols[colKey]); j++ {
		k := cols[colKey][j]
		if k < lo {
			continue
		}
		if k >= hi {
			break // sorted
		}
		if hr := floorDiv(k, usPerHour); hr != hour {
			flush()
			hour, cur = hr, at(hr)
		}
		if cur == nil {
			continue
		}
		_, src, rcode := unflags(cols[colFlags][j])
		cur.minutes[floorDiv(k, usPerMinute)-hour*60][outcome(src, rcode)]++
		cur.last = max(cur.last, k)
		if v := cols[colName][j]; v != 0 {
			for int(v) >= len(t.local[0]) {
				t.local[0], t.local[1] = append(t.local[0], 0), append(t.local[1], 0)
			}
			t.local[0][v]++
			if src == srcBlocked {
				t.local[1][v]++
			}
		}
		cur.ids[0][cols[colClient][j]]++
		if u := cols[colUpstream][j]; u != 0 {
			cur.ids[1][u-1]++
		}
	}
	flush()
	return nil
}

// resolve looks up the text of c's ids it does not know yet: a client by
// its address (by its name when it has none), an upstream by its label.
func (s *sqliteStore) resolve(ctx context.Context, c *counts) error {
	queries := [2]string{
		`SELECT id, CASE addr WHEN '' THEN name ELSE addr END FROM clients WHERE id IN `,
		`SELECT id, text FROM labels WHERE id IN `,
	}
	for l, q := range queries {
		var ids []int64
		for id := range c.ids[l] {
			if _, ok := c.keys[l][id]; !ok {
				ids = append(ids, id)
			}
		}
		err := s.each(ctx, q, ids, func(rows *sql.Rows) error {
			var id int64
			var k string
			err := rows.Scan(&id, &k)
			c.keys[l][id] = k
			c.views[l+2] = nil
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// each calls fn with c's counts of list, by key.
func (c *counts) each(list int, fn func(k string, n int64)) {
	if list < 2 {
		for k, n := range c.names[list] {
			fn(k, n)
		}
		return
	}
	l := list - 2
	for id, n := range c.ids[l] {
		if k, ok := c.keys[l][id]; ok {
			fn(k, n)
		}
	}
}

package history

import (
	"context"
	"slices"
	"strings"
)

// topRolled is a top list of [lo, hi), which holds a whole hour at least,
// from the rollups: the whole hours' counts, the first hour's less its
// rows before lo, and the last hour's when every row of it is before hi;
// the rows of the rest.
func (s *sqliteStore) topRolled(ctx context.Context, list int, lo, hi int64, limit int) ([]count, error) {
	snap, oldest, lo, release, err := s.syncFrom(ctx, lo)
	defer release()
	r := &s.roll
	if err != nil {
		return []count{}, err
	}
	// Past the newest row there is nothing to count: a range that ends
	// centuries ahead (to=99999999999) would walk every hour up to it.
	if hi = min(hi, s.newestKey(snap)+1); lo >= hi {
		return []count{}, nil
	}
	h0, h1 := split(lo, hi, usPerHour)
	// Every hour needed first: rolling one up adds keys to the table, which
	// a merge must not see change.
	var hours []*hourRollup
	var parts []*counts
	type lessPart struct {
		hr *hourRollup
		c  *counts
	}
	var less []lessPart
	if h0 == h1 { // retention left no whole hour
		c, err := s.countSpan(ctx, snap, lo, hi)
		if err != nil {
			return nil, err
		}
		parts = append(parts, c)
	}
	for h := h0; h < h1; h++ {
		if !snap.closed(h) {
			parts = append(parts, r.open[h], r.smalls[h])
			continue
		}
		hr, c, err := s.hour(ctx, snap, h)
		if err != nil {
			return nil, err
		}
		if hr != nil {
			hours = append(hours, hr)
		} else {
			parts = append(parts, c)
		}
	}
	if start := h0 * usPerHour; h0 != h1 && lo < start {
		h := h0 - 1
		var done bool
		if snap.closed(h) && h*usPerHour >= oldest {
			hr, _, err := s.hour(ctx, snap, h)
			if err != nil {
				return nil, err
			}
			if hr != nil {
				p, err := s.prefixTo(ctx, snap, h, lo)
				if err != nil {
					return nil, err
				}
				if p != nil {
					less, done = append(less, lessPart{hr, p}), true
				}
			}
		}
		if !done {
			c, err := s.countSpan(ctx, snap, lo, start)
			if err != nil {
				return nil, err
			}
			parts = append(parts, c)
		}
	}
	if end := h1 * usPerHour; h0 != h1 && hi > end {
		o, sm := r.open[h1], r.smalls[h1]
		if !snap.closed(h1) && lastOf(o) < hi && lastOf(sm) < hi {
			parts = append(parts, o, sm)
		} else {
			c, err := s.countSpan(ctx, snap, end, hi)
			if err != nil {
				return nil, err
			}
			parts = append(parts, c)
		}
	}
	if list >= listClients {
		for _, c := range parts {
			if c != nil {
				if err := s.resolve(ctx, c); err != nil {
					return nil, err
				}
			}
		}
		for _, lp := range less {
			if err := s.resolve(ctx, lp.c); err != nil {
				return nil, err
			}
		}
	}
	m := r.merge(list)
	for _, hr := range hours {
		m.hour(hr)
	}
	for _, c := range parts {
		m.counts(c)
	}
	for _, lp := range less {
		m.less(lp.hr, lp.c)
	}
	return m.ranked(limit), nil
}

// newestKey is the newest row's key the store holds (written, sealed or
// not), as far as the snapshot and the rollups of the hours not closed
// know; below every key when it holds none. The caller holds the
// rollups' lock (syncFrom).
func (s *sqliteStore) newestKey(snap *chunkSnap) int64 {
	k := snap.newest().last
	for _, h := range snap.smalls {
		k = max(k, h.last)
	}
	for _, c := range s.roll.open {
		k = max(k, lastOf(c))
	}
	for _, c := range s.roll.smalls {
		k = max(k, lastOf(c))
	}
	return k
}

func lastOf(c *counts) int64 {
	if c == nil {
		return -1 << 62
	}
	return c.last
}

// syncFrom locks the rollups, loads the chunks and brings the rollups up
// to them (with mu held: a read with chunks older than the last read's
// would count the hours being written again), and returns them, the
// oldest row's key and lo past it, and release, which ends the read
// (the rollups' done) and unlocks them: the caller defers it, whatever
// the error.
func (s *sqliteStore) syncFrom(ctx context.Context, lo int64) (_ *chunkSnap, oldest, from int64, release func(), err error) {
	r := &s.roll
	r.mu.Lock()
	release = func() {
		r.done()
		r.mu.Unlock()
	}
	snap, err := s.index.load(ctx, s.r)
	if err != nil {
		return nil, 0, 0, release, err
	}
	oldest = snap.oldest()
	if err := s.sync(ctx, &snap, oldest); err != nil {
		return nil, 0, 0, release, err
	}
	return &snap, oldest, max(lo, oldest), release, nil
}

// countSpan counts the rows of [lo, hi) (their minutes are good inside
// one hour only).
func (s *sqliteStore) countSpan(ctx context.Context, snap *chunkSnap, lo, hi int64) (*counts, error) {
	c := newCounts()
	heads := append(slices.Clip(snap.overlapping(lo, hi)), snap.smalls...)
	return c, s.countRows(ctx, heads, lo, hi, func(int64) *counts { return c })
}

// prefixTo returns the counts of closed hour h's rows before lo, counting
// only those after the last read's lo when it was not later; nil when
// they are more names than counts keep (the caller counts the rest of the
// hour from the rows).
func (s *sqliteStore) prefixTo(ctx context.Context, snap *chunkSnap, h, lo int64) (*counts, error) {
	r := &s.roll
	if r.prefix == nil || r.prefixOf != h || r.prefixTo > lo {
		r.prefix, r.prefixOf, r.prefixTo = newCounts(), h, h*usPerHour
	}
	p := r.prefix
	at := func(int64) *counts { return p }
	var t tallier
	for r.prefixTo < lo {
		heads := snap.overlapping(r.prefixTo, lo)
		if len(heads) == 0 {
			break
		}
		h := heads[0]
		ok, err := r.held.load(ctx, s, h)
		if err != nil || !ok {
			r.prefix = nil // gone: retention reached it
			return nil, err
		}
		keys, err := r.held.c.column(colKey)
		if err != nil {
			r.prefix = nil
			return nil, err
		}
		j, _ := slices.BinarySearch(keys, r.prefixTo)
		if err := t.rows(&r.held.c, j, r.prefixTo, lo, at); err != nil {
			r.prefix = nil
			return nil, err
		}
		r.prefixTo = min(lo, h.last+1)
	}
	r.prefixTo = lo
	if r.prefix.pruned {
		return nil, nil
	}
	return r.prefix, nil
}

// minutesRolled calls add for each outcome of each minute with rows in
// [lo, hi), which holds a whole minute at least, their rows there
// counted: the whole minutes from the rollups (from the counters of
// minutes in an hour retention deleted rows of); the part of a minute
// [lo, hi) starts in as the closed hour's minute less the hour's rows
// before lo, that it ends in from the hour being written when every row
// of it is before hi; raw counts the rest from the rows.
func (s *sqliteStore) minutesRolled(ctx context.Context, lo, hi int64, add func(m, o, n int64), raw func(lo, hi int64) error) error {
	snap, oldest, lo, release, err := s.syncFrom(ctx, lo)
	defer release()
	r := &s.roll
	if err != nil || lo >= hi {
		return err
	}
	m0, m1 := split(lo, hi, usPerMinute)
	if m0 == m1 { // retention left no whole minute
		return raw(lo, hi)
	}
	if start := m0 * usPerMinute; lo < start {
		m, h := m0-1, floorDiv(m0-1, 60)
		var done bool
		if snap.closed(h) && h*usPerHour >= oldest {
			hr, _, err := s.hour(ctx, snap, h)
			if err != nil {
				return err
			}
			if hr != nil {
				p, err := s.prefixTo(ctx, snap, h, lo)
				if err != nil {
					return err
				}
				if p != nil {
					for o, n := range hr.minutes[m-h*60] {
						if n -= p.minutes[m-h*60][o]; n != 0 {
							add(m, int64(o), n)
						}
					}
					done = true
				}
			}
		}
		if !done {
			if err := raw(lo, start); err != nil {
				return err
			}
		}
	}
	if end := m1 * usPerMinute; hi > end {
		h := floorDiv(m1, 60)
		o, sm := r.open[h], r.smalls[h]
		if !snap.closed(h) && h*usPerHour >= oldest && lastOf(o) < hi && lastOf(sm) < hi {
			for _, c := range []*counts{o, sm} {
				if c == nil {
					continue
				}
				for out, n := range c.minutes[m1-h*60] {
					if n != 0 {
						add(m1, int64(out), n)
					}
				}
			}
		} else if err := raw(end, hi); err != nil {
			return err
		}
	}
	for h := floorDiv(m0, 60); h*60 < m1; h++ {
		a, b := max(m0, h*60), min(m1, h*60+60)
		each := func(mins *[60][numOutcomes]int64) {
			for m := a; m < b; m++ {
				for o, n := range mins[m-h*60] {
					if n != 0 {
						add(m, int64(o), n)
					}
				}
			}
		}
		switch {
		case h*usPerHour < oldest:
			if err := s.minutesCounted(ctx, a, b, add); err != nil {
				return err
			}
		case snap.closed(h):
			hr, c, err := s.hour(ctx, snap, h)
			if err != nil {
				return err
			}
			if hr != nil {
				each(&hr.minutes)
			} else {
				each(&c.minutes)
			}
		default:
			for _, c := range []*counts{r.open[h], r.smalls[h]} {
				if c != nil {
					each(&c.minutes)
				}
			}
		}
	}
	return nil
}

// merge adds up counts for one top list: of the keys of closed hours by
// their ids, of the others by their text.
type merge struct {
	r     *rollups
	list  int
	extra map[string]int64
}

func (r *rollups) merge(list int) *merge {
	return &merge{r: r, list: list, extra: map[string]int64{}}
}

func (m *merge) addID(id uint32, n int64) {
	r := m.r
	if int(id) >= len(r.dense) {
		r.dense = append(r.dense, make([]int64, int(id)+1-len(r.dense))...)
		r.in = append(r.in, make([]bool, int(id)+1-len(r.in))...)
	}
	if !r.in[id] {
		r.in[id] = true
		r.touched = append(r.touched, id)
	}
	r.dense[id] += n
}

func (m *merge) hour(hr *hourRollup) {
	for _, kc := range hr.lists[m.list] {
		m.addID(kc.key, int64(kc.n))
	}
}

func (m *merge) counts(c *counts) {
	if c == nil {
		return
	}
	v := c.view(m.list, &m.r.keys)
	for _, kc := range v.ids {
		m.addID(kc.key, kc.n)
	}
	for _, kc := range v.text {
		m.extra[kc.Key] += kc.Count
	}
}

// less is the hour's counts less those of c (its first rows): the rest
// of the hour, for the keys the hour kept.
func (m *merge) less(hr *hourRollup, c *counts) {
	var sub map[string]int64
	if m.list < 2 {
		sub = c.names[m.list]
	} else {
		sub = map[string]int64{}
		c.each(m.list, func(k string, n int64) { sub[k] += n })
	}
	for _, kc := range hr.lists[m.list] {
		m.addID(kc.key, int64(kc.n)-sub[m.r.keys.text[kc.key]])
	}
}

// ranked returns the limit most counted keys, the most first, ties by
// key, and clears dense for the next merge.
func (m *merge) ranked(limit int) []count {
	r := m.r
	// The limit best in a heap whose root is the worst of them: most
	// candidates are compared with the root alone.
	worse := func(a, b count) bool {
		if a.Count != b.Count {
			return a.Count < b.Count
		}
		return a.Key > b.Key
	}
	var best []count
	offer := func(c count) {
		if c.Count <= 0 {
			return
		}
		if len(best) < limit {
			best = append(best, c)
			for i := len(best) - 1; i > 0; {
				p := (i - 1) / 2
				if !worse(best[i], best[p]) {
					break
				}
				best[i], best[p] = best[p], best[i]
				i = p
			}
			return
		}
		if !worse(best[0], c) {
			return
		}
		best[0] = c
		for i := 0; ; {
			w, l, rr := i, 2*i+1, 2*i+2
			if l < len(best) && worse(best[l], best[w]) {
				w = l
			}
			if rr < len(best) && worse(best[rr], best[w]) {
				w = rr
			}
			if w == i {
				break
			}
			best[i], best[w] = best[w], best[i]
			i = w
		}
	}
	for _, id := range r.touched {
		offer(count{Key: r.keys.text[id], Count: r.dense[id]})
		r.dense[id], r.in[id] = 0, false
	}
	r.touched = r.touched[:0]
	for k, n := range m.extra {
		offer(count{Key: k, Count: n})
	}
	slices.SortFunc(best, func(a, b count) int {
		if a.Count != b.Count {
			return cmpKey(b.Count, a.Count)
		}
		return strings.Compare(a.Key, b.Key)
	})
	return best
}

// heldChunk is a chunk kept decoded across reads, its blobs copied.
type heldChunk struct {
	head   chunkHead
	nb, cb []byte
	c      chunk
}

// load makes h the chunk held, unless it is already; ok is false when h
// is gone.
func (hc *heldChunk) load(ctx context.Context, s *sqliteStore, h chunkHead) (ok bool, err error) {
	if hc.head == h && h.id != 0 {
		return true, nil
	}
	hc.head = chunkHead{}
	err = s.blobs(ctx, h.id, true, func(nb, cb []byte) (bool, error) {
		hc.nb, hc.cb = append(hc.nb[:0], nb...), append(hc.cb[:0], cb...)
		ok = true
		return false, nil
	})
	if err != nil || !ok {
		return false, err
	}
	if err := hc.c.parse(h.first, hc.nb, hc.cb); err != nil {
		return false, err
	}
	hc.head = h
	return true, nil
}

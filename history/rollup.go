package history

import (
	"context"
	"math"
	"slices"
	"sync"
)

// The dashboard's overview asks every few seconds for the day's top lists
// and timeline: counted from the rows, that is 1.4 million rows each time
// with 10,000,000 in the file. The rollups count each hour once instead
// (docs/history.md, "The dashboard's reads"):
//
//   - an hour every row after which is sealed past its end is closed: no
//     row can be added to it, only deleted by retention. Its counts are
//     computed once, from its rows, and kept: for each list the
//     rollupKeys most counted keys, and the rows of each minute by
//     outcome;
//   - the hours not closed yet (the current one, rarely the one before)
//     are counted as their rows are sealed, each sealed chunk once, and
//     kept exactly until they close; the small chunks' rows (8,192 at
//     most) too, each small chunk once, all again after a seal;
//   - the part of an hour a range starts in is the closed hour's counts
//     less those of its rows before the start, counted as the start moves
//     on (the dashboard's day starts a few seconds later at each refresh).
//
// A read holds mu while it brings the rollups up to date and adds them
// up: a few milliseconds once they are, longer for the first read of a
// day (60,000 rows an hour to count); the reads waiting meanwhile then
// find the hours counted instead of counting them again. The writer never
// takes it.
type rollups struct {
	mu sync.Mutex // guards following

	keys   keyTable
	hours  map[int64]*hourRollup // closed hours
	open   map[int64]*counts     // hours not closed: their sealed rows counted
	folded chunkHead             // the newest sealed chunk counted into open
	inited bool                  // open and folded are set

	// The small chunks' rows, by hour, and the chunks they were counted
	// from.
	smalls   map[int64]*counts
	smallsOf []chunkHead

	// The rows of the hour prefixOf from its start to prefixTo, and the
	// chunk prefixTo was in, decoded.
	prefix             *counts
	prefixOf, prefixTo int64
	held               heldChunk

	// A merge's counts by key id, whether it has one, and those ids: zero,
	// false and empty between merges.
	dense   []int64
	in      []bool
	touched []uint32

	transient []*hourRollup // rolled up for this read alone: released at its end
}

// Bounds of the rollups' memory.
const (
	// rollupKeys is how many keys of each list a closed hour keeps, the
	// most counted: an hour's counts are exact while it has at most this
	// many distinct names (clients, upstreams); past it a name is left out
	// of the hours it was asked least in, each of which counted it at most
	// as often as its rollupKeys-th name.
	rollupKeys = 1024
	// rollupHours is how many closed hours are kept at most, the newest:
	// a week and a day, the default retention's and the dashboard's day.
	rollupHours = 8 * 24
)

// The lists of a rollup.
const (
	listDomains = iota
	listBlocked
	listClients
	listUpstreams
	numLists
)

func listOf(what string) int {
	switch what {
	case TopBlocked:
		return listBlocked
	case TopClients:
		return listClients
	case TopUpstreams:
		return listUpstreams
	}
	return listDomains
}

// hourRollup is a closed hour's counts.
type hourRollup struct {
	lists   [numLists][]keyCount // the most counted first, rollupKeys at most
	minutes [60][numOutcomes]int64
}

// keyCount is a key (its id in the key table) and its count: an hour's
// count fits 32 bits below 1.19 million rows a second.
type keyCount struct{ key, n uint32 }

// keyTable gives each key of the closed hours an id, so that adding up
// a day of hours adds numbers, and stores each key's text once.
type keyTable struct {
	gen  uint64 // counts the keys added and freed
	ids  map[string]uint32
	text []string
	refs []int32 // 0: free
	free []uint32
}

func (t *keyTable) add(k string) uint32 {
	if id, ok := t.ids[k]; ok {
		t.refs[id]++
		return id
	}
	if t.ids == nil {
		t.ids = map[string]uint32{}
	}
	t.gen++
	var id uint32
	if n := len(t.free); n > 0 {
		id, t.free = t.free[n-1], t.free[:n-1]
		t.text[id], t.refs[id] = k, 1
	} else {
		id = uint32(len(t.text))
		t.text, t.refs = append(t.text, k), append(t.refs, 1)
	}
	t.ids[k] = id
	return id
}

func (t *keyTable) release(id uint32) {
	if t.refs[id]--; t.refs[id] == 0 {
		t.gen++ // views may hold its id
		delete(t.ids, t.text[id])
		t.text[id] = ""
		t.free = append(t.free, id)
	}
}

// drop forgets a closed hour.
func (r *rollups) drop(h int64) {
	for _, l := range r.hours[h].lists {
		for _, kc := range l {
			r.keys.release(kc.key)
		}
	}
	delete(r.hours, h)
}

// rollup makes a closed hour of c (its ids resolved); nil when a count
// is past 32 bits (the hour's counts are then used as they are).
func (r *rollups) rollup(c *counts) *hourRollup {
	hr := &hourRollup{minutes: c.minutes}
	var tops [numLists][]count
	for l := range numLists {
		byKey := map[string]int64{}
		c.each(l, func(k string, n int64) { byKey[k] += n })
		tops[l] = ranked(byKey, rollupKeys)
		if len(tops[l]) > 0 && tops[l][0].Count > math.MaxUint32 {
			return nil
		}
	}
	for l, top := range tops {
		hr.lists[l] = make([]keyCount, len(top))
		for i, kc := range top {
			hr.lists[l][i] = keyCount{r.keys.add(kc.Key), uint32(kc.Count)}
		}
	}
	return hr
}

// sync brings the rollups up to what snap holds: it forgets the hours
// retention deleted rows of (oldest is snap's), counts the sealed chunks
// added since the last read into the hours not closed, and keeps those
// that closed; and the small chunks. A read cancelled half-way leaves
// the counts as they were (countInto): no chunk is counted twice.
func (s *sqliteStore) sync(ctx context.Context, snap *chunkSnap, oldest int64) error {
	r := &s.roll
	if r.hours == nil {
		r.hours, r.open = map[int64]*hourRollup{}, map[int64]*counts{}
	}
	for h := range r.hours {
		if h*usPerHour < oldest {
			r.drop(h)
		}
	}
	for h := range r.open {
		if h*usPerHour < oldest {
			delete(r.open, h)
		}
	}
	if r.prefix != nil && r.prefixOf*usPerHour < oldest {
		r.prefix = nil
	}
	newest := snap.newest()
	// Where the last read stopped; from the newest sealed chunk's hour
	// when it is not in snap as it was (the first read, or retention
	// reached it).
	i, found := slices.BinarySearchFunc(snap.sealed, r.folded.id, func(h chunkHead, id int64) int { return cmpKey(h.id, id) })
	if !r.inited || r.folded.id != 0 && (!found || snap.sealed[i].last != r.folded.last) {
		open := map[int64]*counts{}
		if h := floorDiv(newest.last, usPerHour); newest.id != 0 && !snap.closed(h) {
			if err := s.countInto(ctx, open, snap.overlapping(h*usPerHour, newest.last+1), h*usPerHour, newest.last+1, oldest); err != nil {
				return err
			}
		}
		r.open, r.folded, r.inited = open, newest, true
	} else {
		if r.folded.id == 0 {
			i = 0
		} else {
			i++
		}
		if fresh := snap.sealed[i:]; len(fresh) > 0 {
			if err := s.countInto(ctx, r.open, fresh, -1<<62, 1<<62, oldest); err != nil {
				return err
			}
			r.folded = newest
		}
	}
	for h, c := range r.open {
		if !snap.closed(h) {
			continue
		}
		delete(r.open, h)
		if r.hours[h] != nil {
			continue
		}
		if err := s.resolve(ctx, c); err != nil {
			return err // counted from its rows when asked for
		}
		if hr := r.rollup(c); hr != nil {
			r.hours[h] = hr
		}
	}
	// The small chunks: a small chunk never changes, new ones come after
	// the others until a seal deletes them all, so only the new ones are
	// counted unless one counted is gone.
	if n := len(r.smallsOf); r.smalls != nil && n <= len(snap.smalls) && slices.Equal(r.smallsOf, snap.smalls[:n]) {
		if fresh := snap.smalls[n:]; len(fresh) > 0 {
			if err := s.countInto(ctx, r.smalls, fresh, -1<<62, 1<<62, oldest); err != nil {
				return err
			}
			r.smallsOf = append(r.smallsOf, fresh...)
		}
		return nil
	}
	smalls := map[int64]*counts{}
	if err := s.countInto(ctx, smalls, snap.smalls, -1<<62, 1<<62, oldest); err != nil {
		return err
	}
	r.smalls, r.smallsOf = smalls, slices.Clone(snap.smalls)
	return nil
}

// countInto counts the rows of heads in [lo, hi) of the hours from
// oldest on, by hour, and adds them to into's only when every chunk was
// read: after an error into is as it was.
func (s *sqliteStore) countInto(ctx context.Context, into map[int64]*counts, heads []chunkHead, lo, hi, oldest int64) error {
	got := map[int64]*counts{}
	err := s.countRows(ctx, heads, lo, hi, func(h int64) *counts {
		if h*usPerHour < oldest {
			return nil // counted from the rows left when asked for
		}
		c := got[h]
		if c == nil {
			c = newCounts()
			got[h] = c
		}
		return c
	})
	if err != nil {
		return err
	}
	for h, c := range got {
		if into[h] == nil {
			into[h] = c
		} else {
			into[h].add(c)
		}
	}
	return nil
}

// evict forgets the oldest closed hours past rollupHours.
func (r *rollups) evict() {
	if len(r.hours) <= rollupHours {
		return
	}
	hs := make([]int64, 0, len(r.hours))
	for h := range r.hours {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	for _, h := range hs[:len(hs)-rollupHours] {
		r.drop(h)
	}
}

// hour returns closed hour h's rollup, counting it from its rows when
// it is not kept, or, when a count of it is past 32 bits, its counts; h's
// rows must all be there (h*usPerHour >= oldest).
func (s *sqliteStore) hour(ctx context.Context, snap *chunkSnap, h int64) (*hourRollup, *counts, error) {
	r := &s.roll
	if hr := r.hours[h]; hr != nil {
		return hr, nil, nil
	}
	c := newCounts()
	lo, hi := h*usPerHour, (h+1)*usPerHour
	if err := s.countRows(ctx, snap.overlapping(lo, hi), lo, hi, func(int64) *counts { return c }); err != nil {
		return nil, nil, err
	}
	if err := s.resolve(ctx, c); err != nil {
		return nil, nil, err
	}
	hr := r.rollup(c)
	if hr == nil {
		return nil, c, nil
	}
	// Kept unless retention deleted rows of it meanwhile (it deletes the
	// oldest first: the oldest row now says).
	again, err := s.index.load(ctx, s.r)
	if err != nil {
		r.transient = append(r.transient, hr)
		return nil, nil, err
	}
	if again.oldest() <= lo {
		r.hours[h] = hr
	} else {
		r.transient = append(r.transient, hr)
	}
	return hr, nil, nil
}

// done ends a read: the hours past the bound and those rolled up for it
// alone are forgotten.
func (r *rollups) done() {
	for _, hr := range r.transient {
		for _, l := range hr.lists {
			for _, kc := range l {
				r.keys.release(kc.key)
			}
		}
	}
	clear(r.transient)
	r.transient = r.transient[:0]
	r.evict()
}

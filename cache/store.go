package cache

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

const (
	// maxShards bounds the shards: enough that two cores (or a few
	// more) rarely meet on one lock, few enough that each shard has room
	// for many answers.
	maxShards = 64
	// minShardBytes is the least budget a shard gets, so that the largest
	// DNS message (64 KiB) fits in one and sampling has many entries to
	// choose from.
	minShardBytes = 256 << 10
	// samples is how many entries the eviction looks at to pick a victim:
	// five, as Redis's sampled LRU does, finds one of the least used
	// fifth of the entries two times in three.
	samples = 5
	// entryOverhead is what an entry costs beyond its answer's bytes and
	// its name, at most: its slot in the shard's items (a hash and a
	// 64-byte item, 72 bytes, in a slice that grows by a quarter: 90),
	// its index in the shard's map (a 16-byte slot and a control byte,
	// at the swiss table's lowest load of 7/16: 39), the name's string
	// rounded up to its size class (16 at most). TestMemoryBound checks
	// it against the heap.
	entryOverhead = 90 + 39 + 16
)

// shard is one part of the cache, with its own lock and byte budget. Its
// entries lie in a dense slice, so that eviction can sample them at
// random, with a map from key hash to position.
type shard struct {
	mu    sync.RWMutex     // guards following
	index map[uint64]int32 // key hash → position in items
	items []slot
	bytes int // the weight of the items

	_ [64]byte // keeps the next shard's lock off this one's cache line
}

// slot is an entry in its shard: the item and its key's hash.
type slot struct {
	h  uint64
	it item
}

// stats are the cache's counters, read without a lock.
type stats struct {
	entries   atomic.Int64
	bytes     atomic.Int64
	evictions atomic.Uint64
}

// get returns the item under h.
func (s *shard) get(h uint64, it *item) bool {
	s.mu.RLock()
	i, ok := s.index[h]
	if ok {
		*it = s.items[i].it
	}
	s.mu.RUnlock()
	return ok
}

// cost is what it weighs against the budget.
func (it *item) cost() int {
	return cap(it.data) + len(it.key.Name) + entryOverhead
}

// admit decides whether a new entry for h weighing w may come in: always
// when there is room or h is there already (a replacement); when the
// shard is full, only when h has been asked for more often than the entry
// it would push out (TinyLFU, with the victim sampled). A flood of
// one-off names asks each once and so stays out, while the names a
// network asks again and again stay in. It is a first look, taken before
// Put reads the answer or pays for the copy; insert decides.
func (s *shard) admit(c *Cache, h uint64, w int, now int64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.index[h]; ok || s.bytes+w <= c.budget {
		return true
	}
	if c.sketch.frequency(h) <= 1 {
		// Asked once (Get counted it): a full shard takes no name on its
		// first sight, as a doorkeeper would not. Sampling victims is a
		// handful of cache misses in memory; a flood of one-off names
		// would pay them for every name.
		return false
	}
	v, dead := s.victimLocked(c, h, now)
	return v >= 0 && (dead || c.sketch.frequency(h) > c.sketch.frequency(s.items[v].h))
}

// victimLocked samples the shard for the entry to evict other than h's,
// and returns its position (-1 when there is none): one past its stale
// window at once, else the least frequently asked of samples entries,
// the one expiring first among equals.
func (s *shard) victimLocked(c *Cache, h uint64, now int64) (victim int, dead bool) {
	victim = -1
	best, bestExpiry := uint8(math.MaxUint8), int64(math.MaxInt64)
	consider := func(i int) bool {
		sl := &s.items[i]
		if sl.h == h {
			return false
		}
		if !sl.it.live(now, c.staleMaxAge) {
			victim, dead = i, true
			return true
		}
		f := c.sketch.frequency(sl.h)
		if expiry := sl.it.expiry(); f < best || f == best && expiry < bestExpiry {
			victim, best, bestExpiry = i, f, expiry
		}
		return false
	}
	n := uint64(len(s.items))
	if n <= samples+1 {
		// As few as that: look at them all, h's among them.
		for i := range s.items {
			if consider(i) {
				break
			}
		}
		return victim, dead
	}
	for range samples {
		if consider(rand.IntN(int(n))) {
			break
		}
	}
	if victim < 0 {
		// Every sample was h's own entry: take its neighbour.
		victim = int((uint64(s.index[h]) + 1) % n)
		dead = !s.items[victim].it.live(now, c.staleMaxAge)
	}
	return victim, dead
}

// insert stores it under h, replacing whatever was there, and makes room
// for it as admit does; it reports false when it turned it away.
func (s *shard) insert(c *Cache, h uint64, it item, now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.insertLocked(c, h, it, now)
}

// insertFailure stores it, a remembered failure, unless h holds an
// answer that is still fresh or stale.
func (s *shard) insertFailure(c *Cache, h uint64, it item, now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.index[h]; ok {
		if old := &s.items[i].it; old.key == it.key && !old.failure && old.live(now, c.staleMaxAge) {
			return
		}
	}
	s.insertLocked(c, h, it, now)
}

// insertLocked stores it under h. A replacement always goes in; a new
// entry for which there is no room goes in only if it was asked for more
// often than each entry it pushes out (TinyLFU's rule).
func (s *shard) insertLocked(c *Cache, h uint64, it item, now int64) bool {
	w := it.cost()
	if w > c.budget {
		return false
	}
	old, replace := s.index[h]
	var freq uint8
	if !replace && s.bytes+w > c.budget {
		freq = c.sketch.frequency(h)
	}
	for s.bytes+w > c.budget {
		v, dead := s.victimLocked(c, h, now)
		if v < 0 {
			break // only h's own entry is left, and goes below
		}
		if !replace && !dead && c.sketch.frequency(s.items[v].h) >= freq {
			return false
		}
		if s.removeLocked(c, v); !dead {
			c.stats.evictions.Add(1)
		}
		if replace {
			old = s.index[h] // the removal may have moved it
		}
	}
	if replace {
		s.bytes -= s.items[old].it.cost()
		c.stats.bytes.Add(-int64(s.items[old].it.cost()))
		s.items[old].it = it
	} else {
		if len(s.items) == cap(s.items) {
			// A quarter more, not append's double: what the slack
			// costs is part of entryOverhead.
			s.items = append(make([]slot, 0, len(s.items)+len(s.items)/4+16), s.items...)
		}
		s.index[h] = int32(len(s.items))
		s.items = append(s.items, slot{h: h, it: it})
		c.stats.entries.Add(1)
	}
	s.bytes += w
	c.stats.bytes.Add(int64(w))
	return true
}

// removeLocked removes the entry at position i, moving the last one in.
func (s *shard) removeLocked(c *Cache, i int) {
	sl := &s.items[i]
	w := sl.it.cost()
	delete(s.index, sl.h)
	last := len(s.items) - 1
	if i != last {
		*sl = s.items[last]
		s.index[sl.h] = int32(i)
	}
	s.items[last] = slot{} // let the collector have its bytes
	s.items = s.items[:last]
	s.bytes -= w
	c.stats.entries.Add(-1)
	c.stats.bytes.Add(-int64(w))
}

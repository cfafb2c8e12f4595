package cache

import (
	"encoding/binary"
	"hash/maphash"
	"time"
)

// Config bounds a Cache and sets its TTL rules (spec section 10). Durations
// are read in whole seconds.
type Config struct {
	// MaxBytes bounds the memory of the entries: each weighs its answer's
	// bytes as allocated, its name and entryOverhead. The frequency
	// sketch, MaxBytes/64 bytes, and its doorkeeper, MaxBytes/32, come on
	// top. cache.size_mib << 20.
	MaxBytes int
	// MinTTL and MaxTTL clamp every TTL of a positive answer, and so its
	// lifetime.
	MinTTL, MaxTTL time.Duration
	// NegativeMaxTTL caps the lifetime of an NXDOMAIN or NODATA answer
	// (RFC 2308); 0 caches none.
	NegativeMaxTTL time.Duration
	// FailureTTL is how long a remembered failure lives (RFC 9520); 0
	// remembers none.
	FailureTTL time.Duration
	// StaleMaxAge is how long past its lifetime an answer is kept for
	// serve-stale (RFC 8767); 0 drops it at expiry.
	StaleMaxAge time.Duration
}

// Key is what an answer is cached under.
type Key struct {
	// Name is the question's name in lower case, fully qualified, in
	// presentation format (as miekg/dns writes it). The cache keeps the
	// string as it is, without copying it: it must not change.
	Name string
	// Type and Class are the question's.
	Type, Class uint16
	// DO and CD are the query's DNSSEC OK and Checking Disabled bits: an
	// answer to one query is not an answer to the other. AD is no part of
	// the key: upstreams are always asked with AD set, and the query path
	// clears it for a client that set neither AD nor DO (RFC 6840 5.7).
	DO, CD bool
}

// State is what Get found for a key.
type State uint8

// The states of a lookup.
const (
	// Miss: nothing usable is cached.
	Miss State = iota
	// Fresh: an answer within its lifetime.
	Fresh
	// Stale: an answer past its lifetime, within Config.StaleMaxAge.
	Stale
	// Failure: a remembered failure within Config.FailureTTL.
	Failure
)

// String names s as the metric nxdns_cache_lookups_total does.
func (s State) String() string {
	switch s {
	case Fresh:
		return "hit"
	case Stale:
		return "stale"
	case Failure:
		return "cached_failure"
	default:
		return "miss"
	}
}

// Cache is the answer cache. Its methods are safe for concurrent use.
type Cache struct {
	seed   maphash.Seed
	shards []shard // a power of two of them
	shift  uint    // 64 - log2(len(shards)): a hash's top bits pick its shard
	budget int     // the bytes one shard may hold: MaxBytes / len(shards)
	sketch sketch

	minTTL, maxTTL, negMaxTTL, failureTTL uint32 // seconds
	staleMaxAge                           int64  // nanoseconds

	stats stats
}

// New returns an empty cache configured by cfg.
func New(cfg Config) *Cache {
	maxBytes := max(cfg.MaxBytes, 0)
	n := 1
	for n < maxShards && maxBytes/(2*n) >= minShardBytes {
		n *= 2
	}
	c := &Cache{
		seed:        maphash.MakeSeed(),
		shards:      make([]shard, n),
		shift:       uint(64 - log2(n)),
		budget:      maxBytes / n,
		minTTL:      seconds(cfg.MinTTL),
		maxTTL:      seconds(cfg.MaxTTL),
		negMaxTTL:   seconds(cfg.NegativeMaxTTL),
		failureTTL:  seconds(cfg.FailureTTL),
		staleMaxAge: int64(max(cfg.StaleMaxAge, 0)),
	}
	for i := range c.shards {
		c.shards[i].index = make(map[uint64]int32)
	}
	c.sketch.init(maxBytes)
	return c
}

// seconds is d in whole seconds, within [0, maxTTL].
func seconds(d time.Duration) uint32 {
	return uint32(min(max(d/time.Second, 0), maxTTL))
}

func log2(n int) int {
	l := 0
	for ; n > 1; n >>= 1 {
		l++
	}
	return l
}

// hash is k's hash: the map key of its entry (the entry holds k to tell a
// collision), its shard (top bits) and its place in the sketch.
func (c *Cache) hash(k Key) uint64 { return c.mix(maphash.String(c.seed, k.Name), k) }

// mix is the hash of a key whose name hashes to h, k giving the other
// fields (LoadFile hashes a name's bytes, as maphash.Bytes does the same
// as maphash.String).
func (c *Cache) mix(h uint64, k Key) uint64 {
	bits := uint64(k.Type)<<32 | uint64(k.Class)<<16
	if k.DO {
		bits |= 1
	}
	if k.CD {
		bits |= 2
	}
	// One round of a 64-bit mixer (splitmix64's) spreads the fields'
	// bits over the whole hash.
	h ^= bits * 0x9E3779B97F4A7C15
	h ^= h >> 30
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 27
	return h
}

func (c *Cache) shard(h uint64) *shard {
	return &c.shards[h>>c.shift&uint64(len(c.shards)-1)]
}

// Get returns k's entry at now and its state, or Miss. It does not
// allocate; it counts the lookup in the frequency sketch, which decides
// who stays when the cache is full.
func (c *Cache) Get(k Key, now time.Time) (Hit, State) {
	hit, st, h := c.Peek(k, now)
	c.Count(h)
	return hit, st
}

// Peek is Get without the count: it returns k's hash too, for Count
// once the lookup turns out to be a query the cache serves (the
// blocking step looks before it knows; a blocked query is not counted).
func (c *Cache) Peek(k Key, now time.Time) (Hit, State, uint64) {
	var hit Hit
	st, h := c.PeekInto(&k, now, &hit)
	return hit, st, h
}

// PeekInto is Peek into *hit, for the query path: the entry is copied
// once, from the shard into *hit, where returning a Hit copies it again
// from stores of other widths, which the copy's loads wait for.
func (c *Cache) PeekInto(k *Key, now time.Time, hit *Hit) (State, uint64) {
	h := c.hash(*k)
	return c.find(k, h, now, hit), h
}

// Count counts a lookup of the key whose hash Peek returned in the
// frequency sketch.
func (c *Cache) Count(h uint64) { c.sketch.increment(h) }

// CountHit is Count for a lookup that Peek answered with hit (a miss's
// zero Hit counts as Count does). A lookup that finds the entry's
// counters full notes it on the entry, for the sketch's period: until
// its next halving the entry's lookups would count nothing, and they
// skip the sketch, whose two cache lines (the doorkeeper's word and the
// counters' block) are a popular name's dearest reads on a hit.
func (c *Cache) CountHit(hit *Hit, h uint64) {
	mark := c.sketch.periodMark()
	if hit.c != nil && hit.it.hot == mark {
		return
	}
	if c.sketch.increment(h) && hit.c != nil {
		hit.markHot(mark)
	}
}

// find puts k's entry, whose hash is h, at now in *hit (the zero Hit for
// a Miss) and returns its state.
func (c *Cache) find(k *Key, h uint64, now time.Time, hit *Hit) State {
	if !c.shard(h).get(h, &hit.it) || hit.it.key != *k {
		*hit = Hit{}
		return Miss
	}
	st := hit.it.state(now.UnixNano(), c.staleMaxAge)
	if st == Miss {
		*hit = Hit{}
		return Miss
	}
	hit.c, hit.h = c, h
	return st
}

// Put stores answer, an upstream's answer to k's question in DNS wire
// format, and reports whether it did. The caller has checked that answer
// parses; Put only walks it and declines whatever it cannot vouch for.
//
// What is cached and for how long is spec section 10's rule: a NOERROR
// answer with answer records lives for the smallest TTL of its answer and
// authority records, each clamped to [MinTTL, MaxTTL] (the stored TTLs
// are the clamped ones); an NXDOMAIN or NODATA answer needs an SOA in its
// authority section and lives for the smaller of the SOA's TTL and its
// MINIMUM, capped by NegativeMaxTTL (the stored SOA's TTL is that
// lifetime). Never cached: a truncated answer, any other rcode, an answer
// without exactly one question or to another question than k's, an
// answer whose lifetime is 0, and one that the admission policy turns
// away when the cache is full.
//
// The stored copy has no OPT record: the caller adds the client's own
// when it answers. Put replaces whatever k had, fresh, stale or failure.
// It allocates once, for the copy, and only when it stores (now and then
// a shard's slice or map grows too).
func (c *Cache) Put(k Key, answer []byte, now time.Time) bool {
	// Admission comes first, so that a flood of one-off names is turned
	// away without a walk of each answer. It weighs the answer as it came,
	// its OPT record included: at most that much more than the entry.
	h := c.hash(k)
	sh := c.shard(h)
	w := weight(len(answer), k)
	if w > c.budget || !sh.admit(c, h, w, now.UnixNano()) {
		return false
	}
	s, ok := walk(answer, c.minTTL, c.maxTTL)
	if !ok || binary.BigEndian.Uint16(answer[2:])&flagTC != 0 ||
		binary.BigEndian.Uint16(answer[s.qend-4:]) != k.Type ||
		binary.BigEndian.Uint16(answer[s.qend-2:]) != k.Class ||
		!nameIs(answer[headerLen:s.qend-4], k.Name) {
		return false
	}
	var life uint32
	positive := s.rcode == rcodeSuccess && s.an > 0
	switch {
	case positive:
		life = s.minTTL
	case s.rcode == rcodeSuccess, s.rcode == rcodeNXDomain:
		if s.soaTTLOff >= 0 {
			life = min(s.soaTTL, s.soaMinimum, c.negMaxTTL)
		}
	}
	if life == 0 {
		return false
	}

	size := s.end
	if s.optStart >= 0 {
		size = s.optStart
	}
	// append, unlike make, rounds the capacity up to the allocator's size
	// class: cap(data) is what the entry costs.
	data := append([]byte(nil), answer[:size]...)
	if s.optStart >= 0 {
		binary.BigEndian.PutUint16(data[10:], uint16(s.ar-1))
	}
	if positive {
		ttlOffsets(data, s.qend, func(off int) {
			binary.BigEndian.PutUint32(data[off:], clamp(binary.BigEndian.Uint32(data[off:]), c.minTTL, c.maxTTL))
		})
	} else {
		binary.BigEndian.PutUint32(data[s.soaTTLOff:], life)
	}
	return sh.insert(c, h, item{
		key:    k,
		data:   data,
		stored: now.UnixNano(),
		life:   life,
		qend:   uint16(s.qend),
		rcode:  uint16(s.rcode),
	}, now.UnixNano())
}

// PutFailure remembers for FailureTTL that resolving k failed. It never
// replaces an answer that is fresh or within its stale window: the caller
// serves that one.
func (c *Cache) PutFailure(k Key, now time.Time) {
	if c.failureTTL == 0 {
		return
	}
	h := c.hash(k)
	sh := c.shard(h)
	t := now.UnixNano()
	if !sh.admit(c, h, weight(0, k), t) {
		return
	}
	sh.insertFailure(c, h, item{key: k, stored: t, life: c.failureTTL, rcode: rcodeServFail, failure: true}, t)
}

// DropStale removes k's entry when at now it is an answer past its
// lifetime (Stale), and reports whether it did: a refresh got a fresher
// answer that Put declined (TTL 0, an NXDOMAIN without SOA), and a fresh
// answer is never replaced by a stale one (spec section 10). A fresh
// entry, one stored since, and a remembered failure stay.
func (c *Cache) DropStale(k Key, now time.Time) bool {
	h := c.hash(k)
	sh := c.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, ok := sh.index[h]
	if !ok {
		return false
	}
	if it := &sh.items[i].it; it.key != k || it.state(now.UnixNano(), c.staleMaxAge) != Stale {
		return false
	}
	sh.removeLocked(c, int(i))
	return true
}

// Entries is the number of entries the cache holds, expired ones not yet
// removed included.
func (c *Cache) Entries() int { return int(c.stats.entries.Load()) }

// Bytes is the weight of the entries the cache holds, never more than
// Config.MaxBytes.
func (c *Cache) Bytes() int64 { return c.stats.bytes.Load() }

// Evictions counts the entries removed to make room for others (not the
// ones removed past their stale window, nor answers turned away).
func (c *Cache) Evictions() uint64 { return c.stats.evictions.Load() }

// item is one entry. Once stored it never changes but for claimed and
// unnamed, which its shard's lock guards: a new answer for the key is a
// new item, so a Hit taken earlier stays valid.
type item struct {
	key Key
	// data is the answer as served (no OPT), with the stored TTLs; nil
	// for a failure.
	data    []byte
	stored  int64  // when it was stored, in Unix nanoseconds (wall clock)
	life    uint32 // its lifetime in seconds
	qend    uint16 // the offset just past its question
	rcode   uint16
	failure bool // a remembered failure, not an answer
	claimed bool // a background refresh is running (Hit.ClaimRefresh)
	// public is the query path's note that data holds no private
	// address (Hit.MarkPublic); it fits in the padding, as do hot and
	// unnamed.
	public bool
	// hot is the sketch's period (its mark, periodMark) in which a lookup
	// found the entry's counters full, or 0: until the next halving its
	// lookups count nothing, and CountHit skips the sketch.
	hot uint8
	// unnamed is the serial of the blocking rule set that names nothing
	// of key.Name (Hit.MarkNamesNothing), or 0.
	unnamed uint32
}

// expiry is when it stops being fresh, in Unix nanoseconds.
func (it *item) expiry() int64 { return it.stored + int64(it.life)*int64(time.Second) }

// state is it's state at now, in Unix nanoseconds.
func (it *item) state(now, staleMaxAge int64) State {
	expiry := it.expiry()
	switch {
	case now < expiry && it.failure:
		return Failure
	case now < expiry:
		return Fresh
	case it.failure || now >= expiry+staleMaxAge:
		return Miss
	default:
		return Stale
	}
}

// live reports whether it is still of use at now: fresh, stale, a
// remembered failure.
func (it *item) live(now, staleMaxAge int64) bool { return it.state(now, staleMaxAge) != Miss }

// weight is what an entry with an answer of size bytes costs against
// MaxBytes, before its data is allocated: the allocation may round size up
// (see Put), which insert then accounts.
func weight(size int, k Key) int {
	return size + len(k.Name) + entryOverhead
}

package actors

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"
)

// Client shares of the pool's slots (issue 25, item 2): one client whose
// names are slow must not hold every slot while another client's queries
// wait behind it. The listener's per-client shares (wire/server/server_fair.go)
// bound the queries a client has in flight, not the upstream slots, which
// are far fewer: 200 queries a second of names answered in 900 ms fit in
// the first and fill 64 slots.
//
// The rule is work-conserving: a client alone uses every slot, as today
// (dnsperf in `task bench`, a router that NATs a whole LAN). Once other
// clients are active — a query of theirs reached the pool in the current
// or the previous epoch (about a second) — a client that holds its share
// of the healthy upstreams' slots (their sum divided by the active
// clients) or more, and wants one more:
//
//   - takes a free slot only when no other client's query is waiting and
//     more than a small reserve stays free for the others (two slots per
//     other active client, at most an eighth of the slots): the others'
//     next queries then find a slot at once instead of waiting for one of
//     its slow exchanges to end;
//   - never waits for a slot: it is refused (ErrShareRefused) instead, so
//     that a freed slot goes to a client below its share. Its queries
//     already waiting count as held here: a client waits only while its
//     slots held and waiting stay below its share.
//
// A client below its share takes any free slot and waits as before; when
// it starts to wait while queries that began waiting alone are queued, it
// wakes them (kick), and those now over their share are refused: the wait
// it queues in is not behind them. Everything here is approximate by
// design — counters in a fixed table of atomics indexed by a keyed hash of
// the client, read without a lock, so that queries deciding at the same
// instant may overrun a share or the reserve by a slot or two — and costs a lone client a hash, three
// atomic loads and an atomic add on taking a slot and on returning it; no
// lock, no allocation.

// shareBuckets is the size of the table of client counters. Two clients
// whose keyed hashes meet count as one; the key is random per pool, so a
// client cannot choose whom it meets, and with this many buckets two given
// clients meet with odds of 1 in 4,096.
const (
	shareBits    = 12
	shareBuckets = 1 << shareBits
)

// epochShift makes an epoch of the clock's nanoseconds: 2^30 ns, about a
// second. A client is active while a query of its reached the pool in this
// epoch or the previous one: long enough to count a client asking every
// few hundred milliseconds between its queries, short enough that a client
// that went quiet stops costing the others a reserve within two seconds.
const epochShift = 30

// reservePerRival is how many slots a client over its share leaves free
// for each other active client: one for a query of theirs in flight and
// one for the next to arrive.
const reservePerRival = 2

// clientShare is one client's counters (or those of the clients that share
// its bucket).
type clientShare struct {
	// counts holds the slots its queries hold (the low 32 bits) and its
	// queries in a blocking slot wait (the high 32 bits), in one word so
	// that a query that ends its wait with a slot moves from one to the
	// other in one atomic add (add), and standing reads both at one
	// instant. Each half stays at or above zero, so no add borrows from
	// the other.
	counts atomic.Uint64
	epoch  atomic.Int64 // the last epoch it was counted active in
}

// add adds held and waiting to c's counts.
func (c *clientShare) add(held, waiting int) {
	c.counts.Add(uint64(int64(waiting)<<32 + int64(held)))
}

// load returns c's counts: slots held, queries waiting.
func (c *clientShare) load() (held, waiting int) {
	v := c.counts.Load()
	return int(int32(uint32(v))), int(int32(v >> 32))
}

// shares is the pool's table of clients and what the fairness rule reads.
type shares struct {
	k0, k1 uint64 // the hash's keys: random per pool, never shown

	// waits counts the queries in a blocking slot wait, every client's
	// (the low 32 bits), and of them those that began waiting with no
	// other client active, the ones a kick is for (the lone, the high 32
	// bits): one word, so that a lone waiter counts itself in both with
	// one atomic add. Each half stays at or above zero.
	waits atomic.Uint64

	// active counts the clients active per epoch, by the epoch's parity:
	// the epoch's low 32 bits, then the count in the low 32 bits of the
	// word, so that a new epoch's first client resets the count with
	// the same compare-and-swap that counts it.
	active [2]atomic.Uint64

	// kick is closed, and replaced, when a client below its share starts
	// to wait while lone waiters are queued: they wake and weigh their
	// share again. Always non-nil.
	kick atomic.Pointer[chan struct{}]

	// adopted is the context whose end closes the kick channel too
	// (adopt): nil until a client's query first waits, an empty adoption
	// once the pool has closed.
	adopted atomic.Pointer[adoption]

	table [shareBuckets]clientShare
}

// adoption is a context the kick stands for, by its Done channel.
type adoption struct {
	done <-chan struct{}
	stop func() bool // unregisters the wake at the context's end; nil once closed
}

// adopt reports whether the end of ctx, whose Done channel is done, closes
// the kick channel, so that a query waiting for a slot under ctx can wait
// on the kick alone: one case fewer in its select, taken by every waiter
// and measured at about 2 % of a forwarded query's CPU under full load.
// The pool adopts the first context a client's query waits under — the
// listener's, which every client query shares, or one derived from it
// with the same Done channel — and keeps it until it closes; a query
// under any other context waits on both.
func (s *shares) adopt(ctx context.Context, done <-chan struct{}) bool {
	if a := s.adopted.Load(); a != nil {
		return a.done == done
	}
	a := &adoption{done: done, stop: context.AfterFunc(ctx, s.wake)}
	if s.adopted.CompareAndSwap(nil, a) {
		return true
	}
	a.stop() // another query adopted first
	return s.adopted.Load().done == done
}

// close lets go of the adopted context: its end no longer wakes anyone,
// and no later query adopts another.
func (s *shares) close() {
	if a := s.adopted.Swap(&adoption{}); a != nil && a.stop != nil {
		a.stop()
	}
}

func newShares() *shares {
	s := &shares{k0: rand.Uint64(), k1: rand.Uint64()}
	ch := make(chan struct{})
	s.kick.Store(&ch)
	return s
}

// client returns a's counters. (Exchange asks for none for a query of
// nxdnsd's own, a cache refresh without a client address: it is no
// client, makes no other client share, and is never refused.)
//
// The hash is multiplicative, of the address's two halves under the
// pool's random keys: the product's top bits, the index, depend on every
// bit of the address. It costs a few nanoseconds on every query, where
// hash/maphash cost several times as much here; it needs only to spread
// addresses and be unknown to clients, not to resist analysis: the table
// is an approximation either way.
func (s *shares) client(a netip.Addr) *clientShare {
	// An IPv4 address as its mapped form's halves, from its four bytes:
	// As16's array is copied from two stores into one wider load, which
	// waits for them.
	hi, lo := uint64(0), uint64(0xffff)<<32
	if a.Is4() {
		b := a.As4()
		lo |= uint64(binary.BigEndian.Uint32(b[:]))
	} else {
		b := a.As16()
		hi, lo = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	}
	hi ^= s.k0
	lo ^= s.k1
	h := (hi*0x9e3779b97f4a7c15 ^ lo) * 0xbf58476d1ce4e5b9
	return &s.table[h>>(64-shareBits)]
}

func epochOf(t time.Time) int64 { return t.UnixNano() >> epochShift }

// arrive counts c active in now's epoch. It writes only at c's first query
// of an epoch.
//
// Of c's queries racing at the start of an epoch, one counts c; the
// others must not go on before it has, or they would weigh themselves
// among too few clients (a lone client, which waits where it should be
// refused, and which no kick then wakes). So the one counting marks c's
// epoch -e while it counts, and the others wait the few nanoseconds that
// takes.
func (s *shares) arrive(c *clientShare, now time.Time) {
	e := epochOf(now)
	for {
		old := c.epoch.Load()
		switch {
		case old >= e:
			return // counted already
		case old < 0:
			runtime.Gosched() // being counted by a query of its racing this one
			continue
		}
		if c.epoch.CompareAndSwap(old, -e) {
			break
		}
	}
	defer c.epoch.Store(e)
	a := &s.active[e&1]
	tag := uint64(uint32(e)) << 32
	for {
		v := a.Load()
		n := tag | 1
		if v&^0xffffffff == tag {
			n = v + 1
		}
		if a.CompareAndSwap(v, n) {
			return
		}
	}
}

// clients returns how many clients are active at now: at least 1.
func (s *shares) clients(now time.Time) int {
	e := epochOf(now)
	return max(1, s.count(e), s.count(e-1))
}

func (s *shares) count(e int64) int {
	v := s.active[e&1].Load()
	if v>>32 != uint64(uint32(e)) {
		return 0
	}
	return int(uint32(v))
}

// The deltas of shares.waits: one waiter, one lone waiter.
const (
	waitOne     int64 = 1
	waitOneLone int64 = 1<<32 | 1
)

// addWaits adds delta to s.waits and returns the new value.
func (s *shares) addWaits(delta int64) uint64 { return s.waits.Add(uint64(delta)) }

// waitingOf and loneOf read the halves of a shares.waits value.
func waitingOf(v uint64) int { return int(int32(uint32(v))) }
func loneOf(v uint64) int    { return int(int32(v >> 32)) }

// wake closes the kick channel, waking every query that waits for a slot,
// and puts a new one in its place.
func (s *shares) wake() {
	ch := make(chan struct{})
	close(*s.kick.Swap(&ch))
}

// standing is where a client stands against its share at one instant.
type standing struct {
	held    int  // slots its queries hold
	waiting int  // its queries waiting for one
	share   int  // the healthy upstreams' slots divided by the active clients, at least 1
	rivals  bool // another client's query is waiting for a slot
	free    int  // free slots of the healthy upstreams
	reserve int  // how many of them a client at its share or over must leave to the others
}

// standing weighs c's share among n active clients (n > 1) against the
// pool's healthy upstreams.
func (p *Pool) standing(c *clientShare, n int) standing {
	var slots, taken int
	for _, u := range p.upstreams {
		if u.eligibility() == Healthy {
			slots += cap(u.slots)
			taken += len(u.slots)
		}
	}
	share := max(1, slots/n)
	held, waiting := c.load()
	return standing{
		held:    held,
		waiting: waiting,
		share:   share,
		rivals:  waitingOf(p.shares.waits.Load()) > waiting,
		free:    slots - taken,
		reserve: min(reservePerRival*(n-1), max(1, slots/8), slots-share),
	}
}

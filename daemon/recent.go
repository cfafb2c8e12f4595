package daemon

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/query"
	"github.com/nxdnsd/nxdnsd/querylog"
)

// recentAttempts is how many attempts of a query's trail a recent query
// keeps: one per upstream tried, and a home configuration has two to
// four. A longer trail keeps its first recentAttempts attempts (see
// recent.add), so a slot stays a fixed size and copying it allocates
// nothing.
const recentAttempts = 8

// recent is the ring of the last answered queries that the status page
// and GET /api/queries show (admin.recent_queries), kept whether or not
// a query log is written.
//
// It is on every query's path, so adding costs a query a few tens of
// nanoseconds and no allocation, however full the ring: the query claims
// the next slot with one atomic add and copies its entry into it under
// that slot's own lock, which only a reader copying the same slot out, or
// a writer a whole ring later, can hold. Nothing is encoded until a
// reader asks (AppendJSON).
type recent struct {
	next  atomic.Uint64 // sequence number of the next query to add; slot next % len(slots)
	slots []recentSlot  // fixed at construction
}

// recentSlot is one kept query, padded to a whole number of cache-line
// pairs: two cores writing neighbouring slots at once never write the same
// line (nor lines the CPU fetches as a pair), which cost a query as much
// as the rest of the copy when they did.
type recentSlot struct {
	slotData
	_ [(slotAlign - unsafe.Sizeof(slotData{})%slotAlign) % slotAlign]byte
}

// slotAlign is two 64-byte cache lines: x86's adjacent-line prefetcher
// fetches them together.
const slotAlign = 128

// slotData is a slot's content. Its fields are written and read only
// under mu. What a query writes comes first: the lock, the sequence
// number and the kept entry lie in three cache lines, the attempts after
// them (a cache hit has none).
type slotData struct {
	mu       sync.Mutex
	seq      uint64 // the sequence number of the query held, plus one; 0 while empty
	entry    kept
	attempts [recentAttempts]actors.Attempt // the first entry.n of the trail
}

// kept is a query.Entry as the ring keeps it: its time as Unix
// nanoseconds and its words (proto, source, zone outcome, cache result)
// as small numbers (words.go), 168 bytes instead of 272, so that adding
// writes three cache lines and not five. A hit's profile had the ring's
// add as its dearest step, all of it waiting for the lines it writes.
type kept struct {
	client                                  netip.AddrPort
	unixNano                                int64
	clientName, qname, upstream, zone, list string
	poolErr                                 error
	duration, queued                        time.Duration
	rcode                                   int32
	qtype, qclass                           uint16
	proto, source, zoneOutcome, cacheResult uint8
	flags                                   uint8 // keptLoopCheck, keptRebind
	n                                       uint8 // attempts kept
}

const (
	keptLoopCheck = 1 << iota
	keptRebind
)

// pack stores e in k; its first n attempts are kept beside.
func (k *kept) pack(e *query.Entry, n int) {
	var flags uint8
	if e.LoopCheck {
		flags |= keptLoopCheck
	}
	if e.Rebind {
		flags |= keptRebind
	}
	// Every field, one by one, not a literal: a literal is built on the
	// stack and copied from there in loads that wait for its narrower
	// stores.
	k.client, k.unixNano = e.Client, e.Time.UnixNano()
	k.clientName, k.qname, k.upstream, k.zone, k.list = e.ClientName, e.QName, e.Upstream, e.Zone, e.List
	k.poolErr, k.duration, k.queued = e.PoolErr, e.Duration, e.Queued
	k.rcode, k.qtype, k.qclass = int32(e.Rcode), e.QType, e.QClass
	k.proto, k.source, k.zoneOutcome, k.cacheResult = wordCode(e.Proto), wordCode(e.Source), wordCode(e.ZoneOutcome), wordCode(e.CacheResult)
	k.flags, k.n = flags, uint8(n)
}

// unpack writes k into e as a query.Entry, without its attempts; its
// time in UTC.
func (k *kept) unpack(e *query.Entry) {
	*e = query.Entry{
		Time: time.Unix(0, k.unixNano).UTC(), Client: k.client, Proto: word(k.proto), ClientName: k.clientName,
		QName: k.qname, QType: k.qtype, QClass: k.qclass, LoopCheck: k.flags&keptLoopCheck != 0, Rebind: k.flags&keptRebind != 0,
		Rcode: int(k.rcode), Source: word(k.source), Upstream: k.upstream, Zone: k.zone, ZoneOutcome: word(k.zoneOutcome),
		Duration: k.duration, Queued: k.queued, PoolErr: k.poolErr, List: k.list, CacheResult: word(k.cacheResult),
	}
}

// newRecent returns a ring of n queries, or nil when n is 0: a nil ring
// keeps nothing and reads as empty.
func newRecent(n int) *recent {
	if n <= 0 {
		return nil
	}
	return &recent{slots: make([]recentSlot, n)}
}

// add keeps a copy of e, overwriting the oldest query once the ring is
// full. e and e.Attempts are the query path's and are reused after
// QueryDone returns, so their values are copied; the strings and errors
// they point to are never modified, and are shared (query.Hooks).
func (r *recent) add(e *query.Entry) {
	if r == nil {
		return
	}
	seq := r.next.Add(1) - 1
	s := &r.slots[seq%uint64(len(r.slots))]
	s.mu.Lock()
	s.seq = seq + 1
	s.entry.pack(e, copy(s.attempts[:], e.Attempts))
	s.mu.Unlock()
}

// Cap returns how many queries the ring keeps: admin.recent_queries.
func (r *recent) Cap() int {
	if r == nil {
		return 0
	}
	return len(r.slots)
}

// AppendJSON appends up to limit of the kept queries to b, newest first,
// as the elements of a JSON array (without its brackets): the query-log
// objects of spec section 6, each with its attempt trail. A query being
// overwritten while the ring is read is left out.
func (r *recent) AppendJSON(b []byte, limit int) []byte {
	if r == nil || limit <= 0 {
		return b
	}
	enc := querylog.Encoder{Attempts: true}
	var (
		e        query.Entry
		attempts [recentAttempts]actors.Attempt
		first    = true
	)
	end := r.next.Load()
	for seq := end; seq > 0 && limit > 0 && end-seq < uint64(len(r.slots)); seq-- {
		if !r.copyOut(seq-1, &e, &attempts) {
			continue // still being written, or already overwritten by a newer query
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = enc.Append(b, &e)
		b = b[:len(b)-1] // the line's newline
		limit--
	}
	return b
}

// copyOut copies the query of sequence number seq into e and attempts,
// e.Attempts pointing into attempts, and reports whether its slot still
// holds it.
func (r *recent) copyOut(seq uint64, e *query.Entry, attempts *[recentAttempts]actors.Attempt) bool {
	s := &r.slots[seq%uint64(len(r.slots))]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seq != seq+1 {
		return false
	}
	s.entry.unpack(e)
	*attempts = s.attempts
	e.Attempts = attempts[:s.entry.n]
	return true
}

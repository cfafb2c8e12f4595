package query

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// CacheConfig turns the answer cache on (spec section 10). The zero value
// leaves it off.
type CacheConfig struct {
	// Cache holds the answers, or nil for no cache.
	Cache *cache.Cache

	// Prefetch refreshes an entry asked in the last 10 % of its lifetime.
	Prefetch bool

	// ServeStale answers with an expired entry (RFC 8767) when resolving
	// it fails or takes longer than StaleClientTimeout; StaleAnswerTTL is
	// the TTL such an answer carries.
	ServeStale         bool
	StaleAnswerTTL     time.Duration
	StaleClientTimeout time.Duration

	// AllDown reports whether every enabled upstream is in backoff: a
	// stale answer then goes out at once. Nil: never.
	AllDown func() bool

	// OnPrefetch hears how each background refresh ended, or is nil.
	OnPrefetch func(answered bool)

	// MaxRefreshes bounds the background refreshes (prefetches and stale
	// entries' resolutions) running at once; 0 means 16. Each holds a
	// goroutine, a copy of its query and an answer buffer (some 5 KiB)
	// for as long as its upstreams take, and a pool slot: the daemon
	// gives them half the enabled upstreams' slots, so that the clients'
	// own queries always have the other half. Past the bound a stale
	// entry's client gets the stale answer at once and a prefetch waits
	// for a later hit.
	MaxRefreshes int
}

// Lookup results of the answer cache, Entry.CacheResult.
const (
	CacheHit           = "hit"
	CacheMiss          = "miss"
	CacheStale         = "stale"
	CacheCachedFailure = "cached_failure"
)

// cacheKeyInto sets *k to r's key in the answer cache: its question, case folded, and
// its DO and CD bits.
func (r *request) cacheKeyInto(k *cache.Key) {
	// Field by field, not a literal copied in: see parseCommon's header.
	k.Name, k.Type, k.Class, k.DO, k.CD = r.lname, r.question[0].Qtype, r.question[0].Qclass, r.do, r.cd
}

// fromCache answers r with a cached entry: its bytes for this client, with
// TTLs lowered by its age, or all staleTTL with an Extended DNS Error of
// code ede for a stale one (ede 0: none). An answer too large for the
// client's UDP size is parsed and truncated as any other.
func (r *request) fromCache(hit cache.Hit, now time.Time, staleTTL uint32, ede uint16, buf []byte) (*dns.Msg, []byte, int) {
	out := hit.AppendAnswer(buf[:0], r.id, r.questionBytes(), now, staleTTL)
	// The client's RD, not the one of the query that filled the entry;
	// the upstream's AD, for a client that may have it (keepsAD).
	flags := dnsmsg.Flags(out) &^ dnsmsg.FlagRD
	if r.rd {
		flags |= dnsmsg.FlagRD
	}
	if !r.keepsAD() {
		flags &^= dnsmsg.FlagAD
	}
	binary.BigEndian.PutUint16(out[2:], flags)
	rcode := hit.Rcode()
	if r.edns {
		plain := len(out)
		out = appendOPT(out, r.do, ede)
		if len(out) > r.limit && ede != 0 {
			// The EDE goes first (spec section 3).
			out = appendOPT(out[:plain], r.do, 0)
			binary.BigEndian.PutUint16(out[10:], binary.BigEndian.Uint16(out[10:])-1)
		}
	}
	if len(out) <= r.limit {
		return nil, out, rcode
	}
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil {
		return r.reply(dns.RcodeServerFailure), nil, 0
	}
	return m, nil, 0
}

// questionBytes is the client's question section as it sent it.
func (r *request) questionBytes() []byte {
	n := dnsmsg.QuestionLen(r.raw[dnsmsg.HeaderLen:])
	return r.raw[dnsmsg.HeaderLen : dnsmsg.HeaderLen+n]
}

// store puts a resolver's answer to r in the cache: its bytes as they
// came, or the parsed message packed again (never one that may hold a
// record parsed leniently: its bytes may not parse).
func (h *Handler) store(k cache.Key, a transport.Answer, now time.Time) {
	raw := a.Raw
	if raw == nil {
		if a.Msg == nil || mayBeLenient(a.Msg) {
			return
		}
		var err error
		if raw, err = a.Msg.Pack(); err != nil {
			return
		}
	}
	h.cache.Cache.Put(k, raw, now)
}

// remember records that resolving k failed here (RFC 9520), unless the
// query was only cancelled.
func (h *Handler) remember(ctx context.Context, k cache.Key, err error, now time.Time) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	h.cache.Cache.PutFailure(k, now)
}

// fromCacheQuick is the cache's fast step (spec section 3, step 4): a
// fresh entry answers at once (and may start a prefetch), a remembered
// failure answers SERVFAIL with EDE 13; a stale entry or a miss, and the
// query's key, are noted for the waiting steps.
func (h *Handler) fromCacheQuick(s *scratch) (m *dns.Msg, out []byte, rcode int, done bool) {
	r, e, buf := &s.req, &s.entry, s.buf
	now := e.Time
	h.lookUp(s)
	h.cache.Cache.CountHit(&s.hit, s.keyHash) // the sketch counts the queries the cache serves, not the blocked
	hit := &s.hit                             // not copied: a Hit is 88 bytes
	switch s.state {
	case cache.Fresh:
		e.Source, e.CacheResult = SourceCache, CacheHit
		if h.cache.Prefetch && hit.PrefetchDue(now) && hit.ClaimRefresh() {
			if packed, err := r.packTrimmed(s.packed[:]); err == nil {
				h.refresh.start(s.key, r, packed, s.zone, hit.Release)
			} else {
				hit.Release()
			}
		}
		m, out, rcode = r.fromCache(*hit, now, 0, 0, buf)
		return m, out, rcode, true
	case cache.Failure:
		e.Source, e.CacheResult = SourceCache, CacheCachedFailure
		return withEDE(r.reply(dns.RcodeServerFailure), edeCachedError, ""), nil, 0, true
	case cache.Stale:
		e.CacheResult = CacheStale
	default:
		e.CacheResult = CacheMiss
	}
	return nil, nil, 0, false
}

// lookUp looks s's query up in the cache, once: s.key, s.hit and s.state
// are the cache's for the rest of the query. The blocking step looks up
// first when rules are in force (block.go), else the cache's step, which
// counts the lookup in the cache's frequency sketch (s.keyHash).
func (h *Handler) lookUp(s *scratch) {
	if s.looked {
		return
	}
	s.looked = true
	s.req.cacheKeyInto(&s.key)
	s.state, s.keyHash = h.cache.Cache.PeekInto(&s.key, s.entry.Time, &s.hit)
}

// resolveStale answers r, whose entry hit has expired but may still be
// served (RFC 8767): it starts (or joins) the entry's refresh and waits for
// it up to StaleClientTimeout, then answers with what the refresh got when
// it was a NOERROR or NXDOMAIN answer (see fromRefresh), else with the
// stale entry: TTL StaleAnswerTTL and EDE 3 (19 for NXDOMAIN). No refresh
// starts, and the stale entry goes out at once, while every upstream is in
// backoff or when MaxRefreshes are running. A refresh still running goes
// on to refresh the entry.
func (h *Handler) resolveStale(ctx context.Context, r *request, z *Zone, k cache.Key, hit cache.Hit, e *Entry, s *scratch, buf []byte) (*dns.Msg, []byte, int) {
	if packed, err := r.packTrimmed(s.packed[:]); err == nil {
		if f := h.refresh.start(k, r, packed, z, nil); f != nil && waitFlight(ctx, f, h.cache.StaleClientTimeout) {
			if m, out, rcode, ok := h.fromRefresh(r, z, k, f, e, buf); ok {
				return m, out, rcode
			}
		}
	}
	e.Source = SourceStale
	code := uint16(edeStaleAnswer)
	if hit.Rcode() == dns.RcodeNameError {
		code = edeStaleNXDomain
	}
	return r.fromCache(hit, e.Time, uint32(h.cache.StaleAnswerTTL/time.Second), code, buf)
}

// fromRefresh answers r with what f, the ended refresh of its expired
// entry k, got: the fresh entry it stored, or its NOERROR or NXDOMAIN
// answer as it came when the cache declined it (TTL 0, no SOA), which
// goes to the client over the stale entry (spec section 10). ok is false
// when the refresh got no such answer: the stale entry stands.
func (h *Handler) fromRefresh(r *request, z *Zone, k cache.Key, f *flight, e *Entry, buf []byte) (m *dns.Msg, out []byte, rcode int, ok bool) {
	if f.answer == nil {
		return nil, nil, 0, false
	}
	var fresh cache.Hit
	st := cache.Miss
	now := time.Now()
	if f.ok {
		fresh, st = h.cache.Cache.Get(k, now)
	}
	if st == cache.Fresh {
		m, out, rcode = r.fromCache(fresh, now, 0, 0, buf)
	} else {
		// f.answer is every waiting client's: each parses its own copy.
		m = new(dns.Msg)
		if err := m.Unpack(f.answer); err != nil {
			return nil, nil, 0, false
		}
		r.adopt(m)
	}
	e.Source, e.Upstream = SourcePool, f.upstream
	if z != nil {
		e.Source, e.Zone, e.ZoneOutcome = SourceForwardZone, z.Name, ZoneAnswer
	}
	return m, out, rcode, true
}

// waitFlight waits for f to end, at most d, and reports whether it ended.
func waitFlight(ctx context.Context, f *flight, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// Package query is nxdnsd's query path: raw client bytes in, raw answer
// bytes out, following the resolution order of the specification (section
// 3): malformed queries, special-use names, local records, forward zones,
// then the upstream pool.
package query

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/wire/server"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// HandlerConfig is what a Handler serves. The daemon translates the
// configuration into it.
type HandlerConfig struct {
	// Zones are the forward zones; no two may share a name.
	Zones []Zone

	// Records are the local records. A name with a CNAME has no other
	// record.
	Records []Record

	// Pool resolves everything else. Required.
	Pool Pool

	// Hooks observes every answered query, or nil.
	Hooks Hooks

	// Cache is the answer cache and its policy; the zero value is none.
	Cache CacheConfig

	// Allow lists the clients served (server.allow); the others are
	// answered REFUSED with EDE 18 and nothing else is done. Nil serves
	// every client; an empty, non-nil list serves none.
	Allow []netip.Prefix

	// Loops, or nil, are the upstream actors' loop checks: one of this
	// process's that comes back as a client query is answered at once and
	// reported (loop.go); another nxdnsd's is forwarded.
	Loops *actors.Loops
}

// Errors of NewHandler; each wraps the detail of the first problem found.
var (
	ErrNoPool    = errors.New("query: no pool")
	ErrBadRecord = errors.New("query: unusable local record")
	ErrBadZone   = errors.New("query: unusable forward zone")
)

// Handler answers client queries. It is immutable once built and safe for
// concurrent use by every listener.
type Handler struct {
	local   localTable
	zones   zoneTable
	pool    Pool        // always non-nil
	hooks   Hooks       // or nil
	cache   CacheConfig // cache.Cache nil: no cache
	refresh *refresher  // nil without a cache
	allow   []netip.Prefix
	open    bool          // Allow was nil: every client is served
	loops   *actors.Loops // or nil
}

// NewHandler builds a Handler, checking the zones and records. An error
// matches ErrNoPool, ErrBadRecord or ErrBadZone and names the first problem
// (records and zones by their index in cfg).
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Pool == nil {
		return nil, ErrNoPool
	}
	local, err := newLocalTable(cfg.Records)
	if err != nil {
		return nil, err
	}
	zones, err := newZoneTable(cfg.Zones)
	if err != nil {
		return nil, err
	}
	h := &Handler{
		local: local,
		zones: zones,
		pool:  cfg.Pool,
		hooks: cfg.Hooks,
		cache: cfg.Cache,
		allow: slices.Clone(cfg.Allow),
		open:  cfg.Allow == nil,
		loops: cfg.Loops,
	}
	if h.cache.Cache != nil {
		h.refresh = newRefresher(h)
	}
	return h, nil
}

// Close ends the cache's background refreshes and waits for them. Call it
// once the listeners have stopped, before the pool is closed.
func (h *Handler) Close() {
	if h.refresh != nil {
		h.refresh.close()
	}
}

// trailCap is how many attempts the reused trail holds before the pool's
// append has to grow it: one per upstream tried, and most queries need one.
const trailCap = 4

// scratch is the per-query memory ServeDNS reuses: the entry handed to Hooks
// and the attempt trail handed to the pool. Both contracts forbid keeping
// them, which is what makes the reuse safe.
type scratch struct {
	req    request
	entry  Entry
	trail  [trailCap]actors.Attempt
	wq     transport.Query
	packed [packedQueryLen]byte

	// What quick found, for slow: r's forward zone (nil: the pool) and
	// its cache entry.
	zone  *Zone
	hit   cache.Hit
	state cache.State

	// held is what the caller of ServeFast attached to the query it
	// handed on (see Attach): it travels with the query to ServeDNS.
	held any
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// putScratch keeps s for another query, dropping references to this
// query's messages and errors.
func putScratch(s *scratch) {
	*s = scratch{}
	scratchPool.Put(s)
}

var (
	_ server.Handler     = (*Handler)(nil)
	_ server.FastHandler = (*Handler)(nil)
)

// ServeDNS answers one raw client query, req.Raw, that arrived over
// req.Proto (ProtoUDP or a stream) from req.Client. It returns the answer
// to send, or nil when the query is to be dropped: shorter than a DNS
// header, or not a query at all (QR set). Every answer carries the query's
// ID and question; over UDP it fits the client's EDNS UDP size, truncated
// with TC set when needed. An answer forwarded as bytes is built in
// req.Answer when its capacity is enough, so the returned slice may be
// req.Answer's.
//
// Hooks.QueryDone hears of every answered query before ServeDNS returns.
// ctx bounds the resolution; the pool and the zone resolvers also apply
// their own deadlines. req.Raw is read only during the call and not
// retained. When req.State holds what ServeFast left of the query, ServeDNS
// goes on from there.
func (h *Handler) ServeDNS(ctx context.Context, req *server.Request) []byte {
	s, resumed := req.State.(*scratch)
	if resumed {
		req.State = nil
		s.req.rebase(req.Raw)
	} else {
		s = getScratch()
		if !h.prepare(s, req) {
			putScratch(s)
			return nil
		}
		if m, out, rcode, done := h.quick(s, req.Answer); done {
			defer putScratch(s)
			return h.finish(s, m, out, rcode)
		}
	}
	defer putScratch(s)
	m, out, rcode := h.slow(ctx, s, req.Answer)
	return h.finish(s, m, out, rcode)
}

// ServeFast answers, without waiting for anything, the queries that need
// no resolver: malformed ones, special-use names, local records, fresh
// cache hits and remembered failures; the listener calls it on its own
// goroutine, before it hands a query to a worker (server.FastHandler). For
// any other query it returns handled false and leaves its work in
// req.State, where ServeDNS picks it up. An answer is built in req.Answer
// when it fits; a dropped query is handled, with a nil answer.
func (h *Handler) ServeFast(req *server.Request) (answer []byte, handled bool) {
	s := getScratch()
	if !h.prepare(s, req) {
		putScratch(s)
		return nil, true
	}
	m, out, rcode, done := h.quick(s, req.Answer)
	if !done {
		req.State = s
		return nil, false
	}
	defer putScratch(s)
	return h.finish(s, m, out, rcode), true
}

// Attach attaches v to a query that ServeFast handed on in state (its
// Request.State), for the caller to find again with Held when ServeDNS is
// called with that state: a server that runs handlers of several
// configurations keeps the one that began the query held until it ends.
func Attach(state, v any) {
	if s, ok := state.(*scratch); ok {
		s.held = v
	}
}

// Abandon gives back what ServeFast kept for a query it handed on that
// will not be served after all (the listener refused it: overload): the
// state's memory. What was attached to it is the caller's to release.
func (h *Handler) Abandon(req *server.Request) {
	if s, ok := req.State.(*scratch); ok {
		putScratch(s)
	}
	req.State = nil
}

// Held returns what Attach attached to the query in state, or nil.
func Held(state any) any {
	if s, ok := state.(*scratch); ok {
		return s.held
	}
	return nil
}

// prepare parses req into s and starts its entry; false means the query
// is to be dropped.
func (h *Handler) prepare(s *scratch, req *server.Request) bool {
	start := time.Now()
	r := &s.req
	ok, reject := parse(r, req.Raw, req.Proto)
	if !ok {
		return false
	}
	r.reject = reject
	e := &s.entry
	e.Time, e.Client, e.Proto, e.ClientName = start, req.Client, req.Proto, req.ClientName
	if len(r.msg.Question) > 0 {
		e.QName, e.QType, e.QClass = r.msg.Question[0].Name, r.msg.Question[0].Qtype, r.msg.Question[0].Qclass
	}
	return true
}

// finish packs a message answer m (out and rcode are the bytes and rcode
// of an answer built as bytes instead), completes the entry and tells the
// hooks. It returns the answer to send.
func (h *Handler) finish(s *scratch, m *dns.Msg, out []byte, rcode int) []byte {
	r, e := &s.req, &s.entry
	e.Rcode = rcode
	if m != nil {
		var err error
		if out, err = r.pack(m); err != nil {
			// Only an answer from a zone or the pool can fail to encode
			// again; the client still deserves an answer.
			m = r.reply(dns.RcodeServerFailure)
			if out, err = r.pack(m); err != nil {
				return nil
			}
		}
		e.Rcode = m.Rcode
	}
	e.Duration = time.Since(e.Time)
	if h.hooks != nil {
		h.hooks.QueryDone(e)
	}
	return out
}

// quick is the resolution order up to the answers that need no waiting
// (spec section 3, steps 1 to 3): a refusal from step 1, special-use names,
// local records, the refusal of what is never forwarded (unforwarded),
// and with the cache on, a fresh entry or a remembered failure. Otherwise
// it notes r's zone and cache state for slow and reports done false.
func (h *Handler) quick(s *scratch, buf []byte) (m *dns.Msg, out []byte, rcode int, done bool) {
	r, e := &s.req, &s.entry
	if !h.Allows(e.Client.Addr()) {
		e.Source = SourceRefused
		return withEDE(r.reply(dns.RcodeRefused), edeProhibited, ""), nil, 0, true
	}
	if r.reject != dns.RcodeSuccess {
		return r.reply(r.reject), nil, 0, true
	}
	if m := h.special(r, e); m != nil {
		e.Source = SourceSpecial
		return m, nil, 0, true
	}
	if m := h.local.answer(r); m != nil {
		e.Source = SourceLocal
		return m, nil, 0, true
	}
	if m := r.unforwarded(); m != nil {
		e.Source = SourceRefused
		return m, nil, 0, true
	}
	s.zone = h.zones.match(r.lname)
	if h.cache.Cache == nil {
		return nil, nil, 0, false
	}
	return h.fromCacheQuick(s, buf)
}

// Allows reports whether a is one of the clients served (HandlerConfig.Allow).
func (h *Handler) Allows(a netip.Addr) bool {
	if h.open {
		return true
	}
	a = a.WithZone("") // a link-local client's zone: Contains refuses zoned addresses
	for _, p := range h.allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// slow resolves what quick could not answer: through the cache's stale
// path, a forward zone or the pool.
func (h *Handler) slow(ctx context.Context, s *scratch, buf []byte) (*dns.Msg, []byte, int) {
	r, e, z := &s.req, &s.entry, s.zone
	if h.cache.Cache == nil {
		return h.resolveFrom(ctx, r, z, e, s, buf, nil)
	}
	k := r.cacheKey()
	if s.state == cache.Stale && h.cache.ServeStale {
		return h.resolveStale(ctx, r, z, k, s.hit, e, s, buf)
	}
	return h.resolveFrom(ctx, r, z, e, s, buf, &k)
}

// resolveFrom answers r from its forward zone z, or the pool when z is nil,
// and with a cache key k (or nil) stores the answer or remembers the
// failure.
func (h *Handler) resolveFrom(ctx context.Context, r *request, z *Zone, e *Entry, s *scratch, buf []byte, k *cache.Key) (*dns.Msg, []byte, int) {
	q := r.query(s, buf)
	switch {
	case q == nil:
		// A query that parsed but does not pack again: nobody is asked.
		e.Source = SourcePool
		if z != nil {
			e.Source = SourceForwardZone
		}
		return r.reply(dns.RcodeServerFailure), nil, 0
	case z != nil:
		return h.forward(ctx, r, z, q, e, k)
	}
	return h.fromPool(ctx, r, q, e, s, k)
}

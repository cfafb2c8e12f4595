// Package query is nxdnsd's query path: raw client bytes in, raw answer
// bytes out, following the resolution order of the specification (section
// 3), which order.go lists step by step.
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
	"github.com/nxdnsd/nxdnsd/blocking"
	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/clients"
	"github.com/nxdnsd/nxdnsd/rebind"
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

	// Clients names the clients (spec section 15) for the query log and
	// blocking's groups, or nil: only a DoH path names a client.
	Clients *clients.Directory

	// Rebind is rebinding protection on the pool's answers (rebind.go),
	// or nil: off.
	Rebind *rebind.Filter

	// Routers is the pool over its router upstreams alone (an RFC 1918 or
	// ULA address), where the reverse names of private addresses go, or
	// nil when it has none: nxdnsd then answers them itself (rebind.go).
	Routers Pool

	// Blocking decides which queries are blocked (spec section 11), or is
	// nil for none. The daemon passes its one Manager's Engine, which
	// outlives every reload.
	Blocking *blocking.Engine
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
	open    bool             // Allow was nil: every client is served
	loops   *actors.Loops    // or nil
	block   *blocking.Engine // always non-nil: an Engine without rules when HandlerConfig.Blocking is nil

	clients *clients.Directory // or nil
	rebind  *rebind.Filter     // or nil: protection off
	routers Pool               // or nil: private reverse names answered here
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

		clients: cfg.Clients,
		rebind:  cfg.Rebind,
		routers: cfg.Routers,
		block:   cfg.Blocking,
	}
	if h.block == nil {
		h.block = blocking.NewEngine(nil) // idle for ever: one atomic load per query
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

// scratch is one query on its way down the resolution order: the memory
// ServeDNS reuses (the entry handed to Hooks and the attempt trail handed
// to the pool, whose contracts forbid keeping them, which makes the reuse
// safe) and what the steps found for the later ones. A query ServeFast
// hands on travels to its worker as a scratch: it is the server.Pending.
type scratch struct {
	h      *Handler // the handler the query began in, which finishes it
	req    request
	entry  Entry
	trail  [trailCap]actors.Attempt
	wq     transport.Query
	packed [packedQueryLen]byte

	// buf is the listener's memory for the answer (its capacity).
	buf []byte

	// What the fast steps found, for the waiting ones: the forward zone
	// (nil: the pool), and with the cache on the query's key, entry and
	// its state.
	zone    *Zone
	key     cache.Key
	hit     cache.Hit
	state   cache.State
	looked  bool   // key, hit and state are set (lookUp)
	keyHash uint64 // key's hash in the cache, for its frequency sketch

	// allowed is set when an allow rule matched the name asked: its
	// answer is exempt from CNAME inspection.
	allowed bool

	// cb, or nil, holds the targets of an answer's chain while they are
	// decided; kept from one query to the next (putScratch).
	cb *chainBuf

	// hold, or nil, is what the caller of ServeFastHolding keeps held for
	// a query handed on, released once the query has ended.
	hold Hold
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch(h *Handler) *scratch {
	s := scratchPool.Get().(*scratch)
	s.h = h
	return s
}

// putScratch keeps s for another query, dropping references to this
// query's messages and errors.
func putScratch(s *scratch) {
	cb := s.cb
	*s = scratch{cb: cb}
	scratchPool.Put(s)
}

var (
	_ server.Handler     = (*Handler)(nil)
	_ server.FastHandler = (*Handler)(nil)
	_ server.Pending     = (*scratch)(nil)
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
// retained. A query ServeFast handed on (req.Pending) goes on from there,
// in the Handler that began it.
func (h *Handler) ServeDNS(ctx context.Context, req *server.Request) []byte {
	if s, ok := req.Pending.(*scratch); ok {
		req.Pending = nil
		return s.Serve(ctx, req)
	}
	s := getScratch(h)
	defer putScratch(s)
	if !h.prepare(s, req) {
		return nil
	}
	if m, out, rcode, done := h.resolveFast(s); done {
		return h.finish(s, m, out, rcode)
	}
	m, out, rcode := h.resolveWaiting(ctx, s)
	return h.finish(s, m, out, rcode)
}

// ServeFast answers, without waiting for anything, the queries the fast
// steps of the resolution order answer (order.go): malformed ones,
// special-use names, local records, blocked names, fresh cache hits and
// remembered failures; the listener calls it on its own goroutine, before it hands a
// query to a worker (server.FastHandler). For any other query it returns
// handled false and sets req.Pending, whose Serve runs the waiting steps.
// An answer is built in req.Answer when it fits; a dropped query is
// handled, with a nil answer.
func (h *Handler) ServeFast(req *server.Request) (answer []byte, handled bool) {
	return h.ServeFastHolding(req, nil)
}

// Hold is what the caller of ServeFastHolding keeps held for a query: the
// daemon's configuration generation, which must outlive every query that
// began in it.
type Hold interface {
	Release()
}

// ServeFastHolding is ServeFast for a caller that holds hold (or nil) for
// the query: a query it hands on carries hold in its req.Pending and
// releases it once it has been served or abandoned; for a query it answers
// (or a panic) hold stays the caller's to release.
func (h *Handler) ServeFastHolding(req *server.Request, hold Hold) (answer []byte, handled bool) {
	s := getScratch(h)
	if !h.prepare(s, req) {
		putScratch(s)
		return nil, true
	}
	m, out, rcode, done := h.resolveFast(s)
	if !done {
		s.hold = hold
		req.Pending = s
		return nil, false
	}
	defer putScratch(s)
	return h.finish(s, m, out, rcode), true
}

// Serve finishes a query ServeFast handed on (server.Pending): the waiting
// steps, on the worker's goroutine, with req the worker's copy of the
// query. Then it releases the query's hold.
func (s *scratch) Serve(ctx context.Context, req *server.Request) []byte {
	defer s.end()
	s.req.rebase(req.Raw)
	s.buf = req.Answer
	m, out, rcode := s.h.resolveWaiting(ctx, s)
	return s.h.finish(s, m, out, rcode)
}

// Abandon gives back what ServeFast kept for a query it handed on that
// will not be served after all (the listener refused it: overload), and
// releases its hold (server.Pending).
func (s *scratch) Abandon() { s.end() }

// end releases s's hold and gives s back.
func (s *scratch) end() {
	hold := s.hold
	putScratch(s)
	if hold != nil {
		hold.Release()
	}
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
	s.buf = req.Answer
	e := &s.entry
	e.Time, e.Client, e.Proto, e.ClientName = start, req.Client, req.Proto, req.ClientName
	h.nameClient(e)
	if len(r.msg.Question) > 0 {
		e.QName, e.QType, e.QClass = r.msg.Question[0].Name, r.msg.Question[0].Qtype, r.msg.Question[0].Qclass
	}
	return true
}

// finish packs a message answer m (out and rcode are the bytes and rcode
// of an answer built as bytes instead), completes the entry and tells the
// hooks. It returns the answer to send.
func (h *Handler) finish(s *scratch, m *dns.Msg, out []byte, rcode int) []byte {
	m, out = h.protect(s, m, out) // step 8: rebinding protection (rebind.go)
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

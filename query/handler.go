// Package query is nxdnsd's query path: raw client bytes in, raw answer
// bytes out, following the resolution order of the specification (section
// 3): malformed queries, special-use names, local records, forward zones,
// then the upstream pool.
package query

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/wire"
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
	wq     wire.Query
	packed [packedQueryLen]byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

var _ wire.Handler = (*Handler)(nil)

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
// retained.
func (h *Handler) ServeDNS(ctx context.Context, req *wire.Request) []byte {
	raw, proto, client, buf := req.Raw, req.Proto, req.Client, req.Answer
	start := time.Now()
	s := scratchPool.Get().(*scratch)
	defer func() {
		*s = scratch{} // drop references to this query's messages and errors
		scratchPool.Put(s)
	}()
	r := &s.req
	ok, reject := parse(r, raw, proto)
	if !ok {
		return nil
	}
	e := &s.entry
	e.Time, e.Client, e.Proto = start, client, proto
	if len(r.msg.Question) > 0 {
		e.QName, e.QType = r.msg.Question[0].Name, r.msg.Question[0].Qtype
	}

	var m *dns.Msg
	var out []byte
	if reject != dns.RcodeSuccess {
		m = r.reply(reject)
	} else {
		m, out, e.Rcode = h.resolve(ctx, r, e, s, buf)
	}
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
	e.Duration = time.Since(start)
	if h.hooks != nil {
		h.hooks.QueryDone(e)
	}
	return out
}

// resolve answers a well-formed query from the first source of the
// resolution order that knows its name: a message to pack, or the bytes of
// an answer forwarded on the byte path and their rcode.
func (h *Handler) resolve(ctx context.Context, r *request, e *Entry, s *scratch, buf []byte) (*dns.Msg, []byte, int) {
	if m := r.special(); m != nil {
		e.Source = SourceSpecial
		return m, nil, 0
	}
	if m := h.local.answer(r); m != nil {
		e.Source = SourceLocal
		return m, nil, 0
	}
	z := h.zones.match(r.lname)
	if h.cache.Cache == nil {
		return h.resolveFrom(ctx, r, z, e, s, buf, nil)
	}
	return h.resolveCached(ctx, r, z, e, s, buf)
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

// Package query is nxdnsd's query path: raw client bytes in, raw answer
// bytes out, following the resolution order of the specification (section
// 3): malformed queries, special-use names, local records, forward zones,
// then the upstream pool.
package query

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
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

	// UpstreamNames names the pool's upstreams by index, to turn
	// actors.Result.Upstream into the query log's name.
	UpstreamNames []string

	// Hooks observes every answered query, or nil.
	Hooks Hooks
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
	local     localTable
	zones     zoneTable
	pool      Pool     // always non-nil
	upstreams []string // by pool index
	hooks     Hooks    // or nil
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
	return &Handler{
		local:     local,
		zones:     zones,
		pool:      cfg.Pool,
		upstreams: append([]string(nil), cfg.UpstreamNames...),
		hooks:     cfg.Hooks,
	}, nil
}

// trailCap is how many attempts the reused trail holds before the pool's
// append has to grow it: one per upstream tried, and most queries need one.
const trailCap = 4

// scratch is the per-query memory Serve reuses: the entry handed to Hooks
// and the attempt trail handed to the pool. Both contracts forbid keeping
// them, which is what makes the reuse safe.
type scratch struct {
	entry Entry
	trail [trailCap]actors.Attempt
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Serve answers one raw client query that arrived over proto (ProtoUDP or a
// stream) from client. It returns the answer to send, or nil when the query
// is to be dropped: shorter than a DNS header, or not a query at all (QR
// set). Every answer carries the query's ID and question; over UDP it fits
// the client's EDNS UDP size, truncated with TC set when needed.
//
// Hooks.QueryDone hears of every answered query before Serve returns. ctx
// bounds the resolution; the pool and the zone resolvers also apply their
// own deadlines. raw is read only during the call and not retained.
func (h *Handler) Serve(ctx context.Context, raw []byte, proto string, client netip.AddrPort) []byte {
	start := time.Now()
	r, reject := parse(raw, proto)
	if r == nil {
		return nil
	}

	s := scratchPool.Get().(*scratch)
	defer func() {
		*s = scratch{} // drop references to this query's messages and errors
		scratchPool.Put(s)
	}()
	e := &s.entry
	e.Time, e.Client, e.Proto = start, client, proto
	if len(r.msg.Question) > 0 {
		e.QName, e.QType = r.msg.Question[0].Name, r.msg.Question[0].Qtype
	}

	var m *dns.Msg
	if reject != dns.RcodeSuccess {
		m = r.reply(reject)
	} else {
		m = h.resolve(ctx, r, e, s.trail[:0])
	}
	out, err := r.pack(m)
	if err != nil {
		// Only an answer from a zone or the pool can fail to encode again;
		// the client still deserves an answer.
		m = r.reply(dns.RcodeServerFailure)
		if out, err = r.pack(m); err != nil {
			return nil
		}
	}
	e.Rcode = m.Rcode
	e.Duration = time.Since(start)
	if h.hooks != nil {
		h.hooks.QueryDone(e)
	}
	return out
}

// resolve answers a well-formed query from the first source of the
// resolution order that knows its name.
func (h *Handler) resolve(ctx context.Context, r *request, e *Entry, trail []actors.Attempt) *dns.Msg {
	if m := r.special(); m != nil {
		e.Source = SourceSpecial
		return m
	}
	if m := h.local.answer(r); m != nil {
		e.Source = SourceLocal
		return m
	}
	if z := h.zones.match(r.lname); z != nil {
		return r.forward(ctx, z, e)
	}
	return h.fromPool(ctx, r, e, trail)
}

package query

import (
	"context"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire"
)

// Pool is the upstream pool as the query path sees it; *actors.Pool
// implements it.
//
// Exchange resolves q within ctx and reports what happened, appending the
// attempts to trail. q is the client's query trimmed for upstreams (see
// wire.Exchanger: it is never modified), valid only during the call: the
// query path reuses its memory for the next query. The query path takes
// ownership of the returned Result.Msg and modifies it; the pool must not
// keep it, nor trail, after returning.
type Pool interface {
	Exchange(ctx context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result
}

// fromPool answers r through the pool: the upstream's answer as it is, or
// SERVFAIL for every error. It fills the entry's source, the pool's
// attribution (untouched: the pool alone decides who is to blame) and trail.
//
// With a WirePool the query is packed once into s, and an answer that comes
// back as bytes is edited in place in buf's memory and returned as bytes
// with its rcode; one that cannot be used as it is gets parsed and adopted.
func (h *Handler) fromPool(ctx context.Context, r *request, e *Entry, s *scratch, buf []byte) (*dns.Msg, []byte, int) {
	var res actors.Result
	wq := h.wireQuery(r, s, buf)
	if wq != nil {
		wq.Arrival = e.Time // the query's arrival, when ServeInto read the clock
		res = h.wire.ExchangeWire(ctx, wq, s.trail[:0])
	} else {
		res = h.pool.Exchange(ctx, &r.msg, s.trail[:0])
	}
	e.Source = SourcePool
	e.Upstream = h.upstreamName(res.Upstream)
	e.Queued = res.Queued
	e.Attempts = res.Attempts
	e.PoolErr = res.Err
	m := res.Msg
	switch {
	case res.Err != nil || m == nil && res.Raw == nil:
		return r.reply(dns.RcodeServerFailure), nil, 0
	case res.Raw != nil:
		out, rcode, ok := r.adoptRaw(res.Raw, res.Layout, wq.Packed)
		if ok {
			return nil, out, rcode
		}
		// Too large for the client: parse it to truncate it.
		m = new(dns.Msg)
		if err := m.Unpack(out); err != nil {
			return r.reply(dns.RcodeServerFailure), nil, 0
		}
	}
	r.adopt(m)
	return m, nil, 0
}

// minAnswerBuf is the least room wireQuery gives an answer: what the UDP
// listener lends, enough for the answers of servers that send more than a
// small EDNS size allows.
const minAnswerBuf = 4096

// wireQuery packs r for the byte path into s, the answer to be read into
// buf, or into a buffer of its own when buf holds less than the client's
// UDP size or minAnswerBuf. It returns nil when the pool has no byte path
// or the query does not pack into s.
func (h *Handler) wireQuery(r *request, s *scratch, buf []byte) *wire.WireQuery {
	if h.wire == nil {
		return nil
	}
	packed, err := r.packTrimmed(s.packed[:])
	if err != nil || len(packed) > len(s.packed) {
		return nil
	}
	if size := max(wire.ClientUDPSize(&r.msg), minAnswerBuf); cap(buf) < size {
		buf = make([]byte, 0, size+optLen)
	}
	s.wq = wire.WireQuery{Msg: &r.msg, Packed: packed, Buf: buf[:0]}
	return &s.wq
}

// upstreamName returns the name of the pool's upstream i, "" for -1 (no
// upstream attributed) or an index the configuration does not have.
func (h *Handler) upstreamName(i int) string {
	if i < 0 || i >= len(h.upstreams) {
		return ""
	}
	return h.upstreams[i]
}

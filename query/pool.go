package query

import (
	"context"
	"errors"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Pool is the upstream pool as the query path sees it; *actors.Pool
// implements it.
//
// Exchange resolves q within ctx under the deadline arrival + the pool's
// total budget, and reports what happened, appending the attempts to
// trail. q is the client's query trimmed for upstreams and packed once,
// valid only during the call: the query path reuses its memory for the
// next query. An answer comes back as a message, which the query path
// then owns and modifies, or as bytes in q.Buf. The pool must not keep q,
// the answer nor trail after returning.
type Pool interface {
	Exchange(ctx context.Context, q *transport.Query, arrival time.Time, trail []actors.Attempt) actors.Result
}

// fromPool answers r through the pool: the upstream's answer as it is, or
// SERVFAIL for every error. It fills the entry's source, the pool's
// attribution (untouched: the pool alone decides who is to blame) and trail.
//
// With a cache key k (nil: no cache) the answer is stored, or the failure
// remembered.
func (h *Handler) fromPool(ctx context.Context, r *request, q *transport.Query, e *Entry, s *scratch, k *cache.Key) (*dns.Msg, []byte, int) {
	q.Client = e.Client.Addr()
	res := h.poolFor(r.lname).Exchange(ctx, q, e.Time, s.trail[:0])
	e.Source = SourcePool
	e.Upstream = res.Upstream
	e.Queued = res.Queued
	e.Attempts = res.Attempts
	e.PoolErr = res.Err
	if res.Err != nil {
		if errors.Is(res.Err, actors.ErrShareRefused) {
			// The client's share of the slots was taken: a verdict on the
			// client, not on the name (nothing remembered) nor on an
			// upstream. REFUSED, as past its share of the listener's
			// permits: a stub tries its next server, and no resolver in
			// front caches it as the name's failure. EDE 0 (Other: RFC 8914
			// has no code for it) says why.
			return withEDE(r.reply(dns.RcodeRefused), edeOther, edeShareText), nil, 0
		}
		if k != nil {
			h.remember(ctx, *k, res.Err, e.Time)
		}
		return r.poolFailure(res), nil, 0
	}
	if k != nil {
		h.store(*k, res.Answer, e.Time)
	}
	return r.answer(q, res.Answer)
}

// answer makes a resolver's answer to q the client's: bytes edited in
// place (ID, the client's spelling of the question, OPT) when they fit the
// client, else a message adopted (see adopt) for the caller to pack.
func (r *request) answer(q *transport.Query, a transport.Answer) (*dns.Msg, []byte, int) {
	m := a.Msg
	switch {
	case a.Raw != nil:
		out, rcode, ok := r.adoptRaw(a.Raw, a.Layout, q.Packed)
		if ok {
			return nil, out, rcode
		}
		// Too large for the client: parse it to truncate it.
		m = new(dns.Msg)
		if err := m.Unpack(out); err != nil {
			return r.reply(dns.RcodeServerFailure), nil, 0
		}
	case m == nil:
		return r.reply(dns.RcodeServerFailure), nil, 0
	}
	r.adopt(m)
	return m, nil, 0
}

// minAnswerBuf is the least room query gives an answer: what the UDP
// listener lends, enough for the answers of servers that send more than a
// small EDNS size allows.
const minAnswerBuf = 4096

// query packs r once, for every resolver it may go to, into s (or a fresh
// slice when it does not fit there), the answer to be read into buf, or
// into a buffer of its own when buf holds less than the client's UDP size
// or minAnswerBuf. It returns nil when r does not pack.
func (r *request) query(s *scratch, buf []byte) *transport.Query {
	packed, err := r.packTrimmed(s.packed[:])
	if err != nil {
		return nil
	}
	if size := max(dnsmsg.ClientUDPSize(&r.msg), minAnswerBuf); cap(buf) < size {
		buf = make([]byte, 0, size+optLen)
	}
	s.wq = transport.Query{} // then field by field: see parseCommon's header
	s.wq.Msg, s.wq.Packed, s.wq.Buf = &r.msg, packed, buf[:0]
	return &s.wq
}

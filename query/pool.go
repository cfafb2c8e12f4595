package query

import (
	"context"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
)

// Pool is the upstream pool as the query path sees it; *actors.Pool
// implements it.
//
// Exchange resolves q within ctx and reports what happened, appending the
// attempts to trail. q is the client's query trimmed for upstreams (see
// wire.Exchanger: it is never modified). The query path takes ownership of
// the returned Result.Msg and modifies it; the pool must not keep it, nor
// trail, after returning.
type Pool interface {
	Exchange(ctx context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result
}

// fromPool answers r through the pool: the upstream's answer as it is, or
// SERVFAIL for every error. It fills the entry's source, the pool's
// attribution (untouched: the pool alone decides who is to blame) and trail.
func (h *Handler) fromPool(ctx context.Context, r *request, e *Entry, trail []actors.Attempt) *dns.Msg {
	res := h.pool.Exchange(ctx, &r.msg, trail)
	e.Source = SourcePool
	e.Upstream = h.upstreamName(res.Upstream)
	e.Queued = res.Queued
	e.Attempts = res.Attempts
	e.PoolErr = res.Err
	if res.Err != nil || res.Msg == nil {
		return r.reply(dns.RcodeServerFailure)
	}
	r.adopt(res.Msg)
	return res.Msg
}

// upstreamName returns the name of the pool's upstream i, "" for -1 (no
// upstream attributed) or an index the configuration does not have.
func (h *Handler) upstreamName(i int) string {
	if i < 0 || i >= len(h.upstreams) {
		return ""
	}
	return h.upstreams[i]
}

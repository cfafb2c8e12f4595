package query

import (
	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/rebind"
)

// The query path's part of spec section 15 besides client names: the
// reverse names of private addresses (step 6 of the resolution order) and
// rebinding protection (step 8). The rules themselves are package
// rebind's.

// emptyZone answers a private reverse name that no forward zone covers
// when the pool has no router upstream (HandlerConfig.Routers nil): as the
// empty zone of RFC 6303 section 3, NXDOMAIN with the zone's SOA, source
// special. It is a fast step placed before the cache's, so that such a
// name is never cached, refreshed nor sent anywhere: "never reach a
// public resolver, whoever asks". With a router the name goes on to it
// (poolFor), through the cache as any other.
func (h *Handler) emptyZone(s *scratch) (*dns.Msg, []byte, int, bool) {
	if s.zone != nil || h.routers != nil {
		return nil, nil, 0, false
	}
	zone, ok := rebind.PrivateReverseZone(s.req.lname)
	if !ok {
		return nil, nil, 0, false
	}
	m := s.req.reply(dns.RcodeNameError)
	rebind.ReverseAnswer(m, zone)
	s.entry.Source = SourceSpecial
	return m, nil, 0, true
}

// poolFor is the pool that resolves name, a question's name: the router
// upstreams alone for a private reverse name when the pool has any (a
// client's query and the cache's refresh of its entry alike), else the
// whole pool. No forward zone covers name: the caller asks the zone
// otherwise.
func (h *Handler) poolFor(name string) Pool {
	if h.routers != nil {
		if _, ok := rebind.PrivateReverseZone(name); ok {
			return h.routers
		}
	}
	return h.pool
}

// protect is rebinding protection (spec section 15; step 8 of the
// resolution order) on the answer about to be sent, m or its bytes out:
// applied to every answer that came from the pool, fresh or from the
// cache (never a forward zone's, a local record's or a special name's).
// The cache keeps the upstream's answer as it came; the answer is
// stripped on its way out, for every client. An answer that lost records
// comes back as a message (out nil) with EDE 15 and Entry.Rebind set;
// one that holds no private address comes back as it was, bytes
// untouched. Bytes that looked private but do not parse become SERVFAIL.
//
// Cost on an answer without a private address: one walk of its bytes
// (no allocation), or of a message's records; for a cache hit, once an
// entry (cache.Hit.MarkPublic), then nothing.
func (h *Handler) protect(s *scratch, m *dns.Msg, out []byte) (*dns.Msg, []byte) {
	if h.rebind == nil || s.zone != nil {
		return m, out
	}
	switch s.entry.Source {
	case SourcePool, SourceCache, SourceStale:
	default:
		return m, out
	}
	if m == nil {
		// A cached answer's bytes are walked once: their first hit
		// notes on the entry that they hold no private address.
		if cached := s.entry.Source != SourcePool; cached && s.hit.Public() {
			return nil, out
		} else if cached && rebind.Public(out) {
			s.hit.MarkPublic()
			return nil, out
		}
		stripped, err := h.rebind.Strip(out)
		if err != nil {
			return s.req.reply(dns.RcodeServerFailure), nil
		}
		if stripped == nil {
			return nil, out
		}
		// out was the client's answer already (its ID, question and
		// OPT): parsed, it is one the upstream's bytes made.
		m = stripped
		s.req.recheck = mayBeLenient(m)
	} else if !h.rebind.StripMsg(m) {
		return m, out
	}
	s.entry.Rebind = true
	return withEDE(m, rebind.EDECode, rebind.EDEText), nil
}

package query

import (
	"context"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/cache"
)

// The resolution order of spec section 3, in one place: a query goes down
// these lists until a step answers it. A new step is a function of the
// type of its list, written beside the ones below and added at its place
// in the order; what it learns for a later step goes in the scratch.
//
// The fast steps never wait. ServeFast runs them on the listener's
// goroutine, so that what they answer — a refusal, a name nxdnsd owns, a
// blocked name, a fresh cache hit — costs no handoff to a worker; ServeDNS runs them first
// for a query that came another way. A query that none answers is handed
// on (server.Pending), and its worker runs the waiting steps, which may
// wait for a refresh or a resolver. The last one always answers.
//
// The lists are arrays of functions, not interfaces: a step costs one
// indirect call and nothing on the heap.
var (
	fastSteps = [...]fastStep{
		(*Handler).refuseClient,      // 1: a client outside server.allow: REFUSED, EDE 18
		(*Handler).refuseMalformed,   // 1: FORMERR, NOTIMP
		(*Handler).answerSpecial,     // 2: special-use names, our own loop checks
		(*Handler).answerLocal,       // 2: local_records
		(*Handler).refuseUnforwarded, // 2: what is never forwarded (unforwarded.go)
		(*Handler).answerBlocked,     // 3: blocking (section 11, block.go)
		(*Handler).route,             // 5's choice, made now: the cache's refreshes ask the same way
		(*Handler).emptyZone,         // 6, answered here: a private reverse name, no router (rebind.go)
		(*Handler).answerFresh,       // 4: a fresh cache entry, a remembered failure
	}
	waitingSteps = [...]waitingStep{
		(*Handler).answerStale, // 4: an expired entry while its refresh runs (RFC 8767)
		(*Handler).answerZone,  // 5: forward_zones, the longest matching suffix
		// 6: a private reverse name with a router goes to it alone (poolFor).
		(*Handler).answerPool, // 7: the upstream pool; always answers
	}
	// 8: the inspection of an answer from the cache or a resolver: CNAME
	// inspection is inspect (block.go), on the exits of answerFresh,
	// answerStale, answerZone and answerPool; rebinding protection runs
	// in finish, on every answer from the pool (rebind.go).
)

// fastStep is a step that never waits. It answers the query in s (done
// true, with a message m for finish to pack, or the bytes out and their
// rcode) or leaves it to the next step. Building its answer in s.buf is
// allowed.
type fastStep func(h *Handler, s *scratch) (m *dns.Msg, out []byte, rcode int, done bool)

// waitingStep is a step that may wait, under ctx, as a fastStep otherwise.
type waitingStep func(h *Handler, ctx context.Context, s *scratch) (m *dns.Msg, out []byte, rcode int, done bool)

// resolveFast runs the fast steps in order until one answers.
func (h *Handler) resolveFast(s *scratch) (m *dns.Msg, out []byte, rcode int, done bool) {
	for _, step := range fastSteps {
		if m, out, rcode, done = step(h, s); done {
			return m, out, rcode, true
		}
	}
	return nil, nil, 0, false
}

// resolveWaiting runs the waiting steps in order until one answers, as
// the last one always does.
func (h *Handler) resolveWaiting(ctx context.Context, s *scratch) (m *dns.Msg, out []byte, rcode int) {
	for _, step := range waitingSteps {
		if m, out, rcode, done := step(h, ctx, s); done {
			return m, out, rcode
		}
	}
	panic("query: no waiting step answered") // answerPool always does
}

// refuseClient answers REFUSED with EDE 18 to a client that
// HandlerConfig.Allow does not list; nothing else is done for it.
func (h *Handler) refuseClient(s *scratch) (*dns.Msg, []byte, int, bool) {
	if h.Allows(s.entry.Client.Addr()) {
		return nil, nil, 0, false
	}
	s.entry.Source = SourceRefused
	return withEDE(s.req.reply(dns.RcodeRefused), edeProhibited, ""), nil, 0, true
}

// refuseMalformed answers what parse found wrong with the query: FORMERR,
// NOTIMP.
func (h *Handler) refuseMalformed(s *scratch) (*dns.Msg, []byte, int, bool) {
	if s.req.reject == dns.RcodeSuccess {
		return nil, nil, 0, false
	}
	return s.req.reply(s.req.reject), nil, 0, true
}

// answerSpecial answers the special-use names (special.go) and the loop
// checks of this process coming back (loop.go).
func (h *Handler) answerSpecial(s *scratch) (*dns.Msg, []byte, int, bool) {
	m := h.special(&s.req, &s.entry)
	if m == nil {
		return nil, nil, 0, false
	}
	s.entry.Source = SourceSpecial
	return m, nil, 0, true
}

// answerLocal answers from the local records (local.go).
func (h *Handler) answerLocal(s *scratch) (*dns.Msg, []byte, int, bool) {
	m := h.local.answer(&s.req)
	if m == nil {
		return nil, nil, 0, false
	}
	s.entry.Source = SourceLocal
	return m, nil, 0, true
}

// refuseUnforwarded refuses what is never forwarded (unforwarded.go).
func (h *Handler) refuseUnforwarded(s *scratch) (*dns.Msg, []byte, int, bool) {
	m := s.req.unforwarded()
	if m == nil {
		return nil, nil, 0, false
	}
	s.entry.Source = SourceRefused
	return m, nil, 0, true
}

// route notes the forward zone the query goes to (nil: the pool). It
// answers nothing: the choice is step 5's, made before the cache's step
// because a refresh of the query's entry must ask where the query would.
func (h *Handler) route(s *scratch) (*dns.Msg, []byte, int, bool) {
	s.zone = h.zones.match(s.req.lname)
	return nil, nil, 0, false
}

// answerFresh is the cache's step (cache.go, fromCacheQuick), with the
// cache on.
func (h *Handler) answerFresh(s *scratch) (*dns.Msg, []byte, int, bool) {
	if h.cache.Cache == nil {
		return nil, nil, 0, false
	}
	m, out, rcode, done := h.fromCacheQuick(s)
	if done {
		m, out, rcode = h.inspect(s, m, out, rcode)
	}
	return m, out, rcode, done
}

// answerStale serves an expired entry, with ServeStale on, while its
// refresh runs (cache.go, resolveStale).
func (h *Handler) answerStale(ctx context.Context, s *scratch) (*dns.Msg, []byte, int, bool) {
	if h.cache.Cache == nil || s.state != cache.Stale || !h.cache.ServeStale {
		return nil, nil, 0, false
	}
	m, out, rcode := h.resolveStale(ctx, &s.req, s.zone, s.key, s.hit, &s.entry, s, s.buf)
	m, out, rcode = h.inspect(s, m, out, rcode)
	return m, out, rcode, true
}

// answerZone asks the query's forward zone, if it has one (zones.go).
func (h *Handler) answerZone(ctx context.Context, s *scratch) (*dns.Msg, []byte, int, bool) {
	z := s.zone
	if z == nil {
		return nil, nil, 0, false
	}
	q := s.req.query(s, s.buf)
	if q == nil {
		// A query that parsed but does not pack again: nobody is asked.
		s.entry.Source = SourceForwardZone
		return s.req.reply(dns.RcodeServerFailure), nil, 0, true
	}
	m, out, rcode := h.forward(ctx, &s.req, z, q, &s.entry, s.cacheKey())
	m, out, rcode = h.inspect(s, m, out, rcode)
	return m, out, rcode, true
}

// answerPool asks the upstream pool (pool.go).
func (h *Handler) answerPool(ctx context.Context, s *scratch) (*dns.Msg, []byte, int, bool) {
	q := s.req.query(s, s.buf)
	if q == nil {
		s.entry.Source = SourcePool
		return s.req.reply(dns.RcodeServerFailure), nil, 0, true
	}
	m, out, rcode := h.fromPool(ctx, &s.req, q, &s.entry, s, s.cacheKey())
	m, out, rcode = h.inspect(s, m, out, rcode)
	return m, out, rcode, true
}

// cacheKey is the query's key in the cache, for storing its answer or
// remembering its failure, or nil without a cache.
func (s *scratch) cacheKey() *cache.Key {
	if s.h.cache.Cache == nil {
		return nil
	}
	return &s.key
}

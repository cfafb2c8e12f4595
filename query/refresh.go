package query

import (
	"context"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// defaultMaxRefreshes is CacheConfig.MaxRefreshes when it is not set:
// half the slots of one upstream with the default slots, 32 (the daemon
// always sets it, from the configured upstreams).
const defaultMaxRefreshes = 16

// refresher runs the cache's own resolutions: prefetches of entries near
// their end, and the resolutions a stale entry's clients wait for (spec
// section 10). They are the pool's own queries, not a client's: at most
// one per key and CacheConfig.MaxRefreshes in all at a time, none while every
// upstream is in backoff (the upstreams' probes find the way back), on
// goroutines the refresher owns and Close ends.
type refresher struct {
	h      *Handler
	ctx    context.Context // ends with Close: cancels refreshes in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup // one per refresh running

	limit int // the most refreshes running at once: CacheConfig.MaxRefreshes

	mu       sync.Mutex            // guards following
	inflight map[cache.Key]*flight // one per refresh running: at most limit
	closed   bool
}

// flight is one refresh; done is closed when it has ended, after which ok
// says whether it stored a fresh answer, answer holds the answer itself
// when it was NOERROR or NXDOMAIN (cached or not: spec section 10, a
// fresh answer is never replaced by a stale one), and upstream names who
// gave it. answer is shared by every client waiting: read it, never
// write it.
type flight struct {
	done     chan struct{}
	ok       bool
	answer   []byte
	upstream string
}

func newRefresher(h *Handler) *refresher {
	ctx, cancel := context.WithCancel(context.Background())
	limit := h.cache.MaxRefreshes
	if limit <= 0 {
		limit = defaultMaxRefreshes
	}
	return &refresher{h: h, ctx: ctx, cancel: cancel, limit: limit, inflight: make(map[cache.Key]*flight)}
}

// start refreshes k, r's key (packed: r packed for upstreams), and returns
// the flight to wait for: the refresh of k running already, if any, else
// a new one. It returns nil, and starts nothing, after Close, while every
// upstream is in backoff (z nil and CacheConfig.AllDown: a stale answer
// then goes out at once, spec section 10), or when CacheConfig.MaxRefreshes
// are running. The query is copied: r lives only during ServeDNS. z is
// r's forward zone, or nil for the pool.
//
// A prefetch passes release, the end of its claim on the entry: the
// refresh calls it when it stores nothing (so that a later hit may try
// again), and start calls it at once when it starts no refresh with it.
// A stale entry's refresh passes nil.
func (rf *refresher) start(k cache.Key, r *request, packed []byte, z *Zone, release func()) *flight {
	down := z == nil && rf.h.cache.AllDown != nil && rf.h.cache.AllDown()
	rf.mu.Lock()
	f := rf.inflight[k]
	if rf.closed || down {
		f = nil
	}
	if f != nil || rf.closed || down || len(rf.inflight) >= rf.limit {
		rf.mu.Unlock()
		if release != nil {
			release()
		}
		return f
	}
	f = &flight{done: make(chan struct{})}
	rf.inflight[k] = f
	rf.wg.Add(1)
	rf.mu.Unlock()

	q := &transport.Query{Msg: r.msg.Copy(), Packed: append([]byte(nil), packed...), Buf: make([]byte, 0, minAnswerBuf)}
	go rf.run(k, q, z, f, release)
	return f
}

// run resolves q and stores the answer under k.
func (rf *refresher) run(k cache.Key, q *transport.Query, z *Zone, f *flight, release func()) {
	defer rf.wg.Done()
	h := rf.h
	start := time.Now()
	var a transport.Answer
	var err error
	if z != nil {
		a, err = z.Client.Exchange(rf.ctx, q, time.Time{})
		f.upstream = z.Resolver
	} else {
		res := h.poolFor(q.Msg.Question[0].Name).Exchange(rf.ctx, q, start, nil)
		a, err, f.upstream = res.Answer, res.Err, res.Upstream
	}
	if err == nil {
		rf.settle(k, a, f)
	}
	if release != nil { // a prefetch
		if !f.ok {
			release()
		}
		if h.cache.OnPrefetch != nil {
			h.cache.OnPrefetch(f.ok)
		}
	}
	rf.mu.Lock()
	delete(rf.inflight, k)
	rf.mu.Unlock()
	close(f.done)
}

// settle stores a, the answer of k's refresh, and keeps it in f for the
// clients waiting. A NOERROR or NXDOMAIN answer that the cache declines
// (TTL 0, no SOA) ends k's stale entry: it is fresher than the entry,
// which must not be served over it (spec section 10). Any other rcode is
// a failed resolution, for which the stale entry stands.
func (rf *refresher) settle(k cache.Key, a transport.Answer, f *flight) {
	raw, rcode := a.Raw, a.Layout.Rcode
	cacheable := raw != nil
	if raw == nil {
		if a.Msg == nil {
			return
		}
		rcode = a.Msg.Rcode
		// A record parsed leniently may not parse once packed: never
		// cached, and a waiting client that cannot parse it gets the
		// stale answer.
		cacheable = !mayBeLenient(a.Msg)
		var err error
		if raw, err = a.Msg.Pack(); err != nil {
			return
		}
	}
	now := time.Now()
	c := rf.h.cache.Cache
	f.ok = cacheable && c.Put(k, raw, now)
	if rcode != dns.RcodeSuccess && rcode != dns.RcodeNameError {
		return
	}
	f.answer = raw
	if !f.ok {
		c.DropStale(k, now)
	}
}

// close cancels the refreshes in flight and waits for them to end; later
// starts refresh nothing.
func (rf *refresher) close() {
	rf.mu.Lock()
	rf.closed = true
	rf.mu.Unlock()
	rf.cancel()
	rf.wg.Wait()
}

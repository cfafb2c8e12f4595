package query

import (
	"context"
	"sync"
	"time"

	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/wire"
)

// refresher runs the cache's own resolutions: prefetches of entries near
// their end, and the resolutions a stale entry's clients wait for (spec
// section 10). They are the pool's own queries, not a client's: at most
// one per key at a time, on goroutines the refresher owns and Close ends.
type refresher struct {
	h      *Handler
	ctx    context.Context // ends with Close: cancels refreshes in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup // one per refresh running

	mu       sync.Mutex // guards following
	inflight map[cache.Key]*flight
	closed   bool
}

// flight is one refresh; done is closed when it has ended, after which ok
// says whether it stored a fresh answer and upstream who gave it.
type flight struct {
	done     chan struct{}
	ok       bool
	upstream string
}

func newRefresher(h *Handler) *refresher {
	ctx, cancel := context.WithCancel(context.Background())
	return &refresher{h: h, ctx: ctx, cancel: cancel, inflight: make(map[cache.Key]*flight)}
}

// start refreshes k, r's key (packed: r packed for upstreams), unless a
// refresh of k is running already, and returns the flight to wait for. The
// query is copied: r lives only during ServeDNS. z is r's forward zone, or
// nil for the pool. A prefetch passes release, called when it stores
// nothing (so that a later hit may try again); a stale entry's refresh
// passes nil. After Close it returns a flight that has ended without an
// answer.
func (rf *refresher) start(k cache.Key, r *request, packed []byte, z *Zone, release func()) *flight {
	rf.mu.Lock()
	if f := rf.inflight[k]; f != nil {
		rf.mu.Unlock()
		return f
	}
	f := &flight{done: make(chan struct{})}
	if rf.closed {
		rf.mu.Unlock()
		if release != nil {
			release()
		}
		close(f.done)
		return f
	}
	rf.inflight[k] = f
	rf.wg.Add(1)
	rf.mu.Unlock()

	q := &wire.Query{Msg: r.msg.Copy(), Packed: append([]byte(nil), packed...), Buf: make([]byte, 0, minAnswerBuf)}
	go rf.run(k, q, z, f, release)
	return f
}

// run resolves q and stores the answer under k.
func (rf *refresher) run(k cache.Key, q *wire.Query, z *Zone, f *flight, release func()) {
	defer rf.wg.Done()
	h := rf.h
	start := time.Now()
	var a wire.Answer
	var err error
	if z != nil {
		a, err = z.Client.Exchange(rf.ctx, q, time.Time{})
		f.upstream = z.Resolver
	} else {
		res := h.pool.Exchange(rf.ctx, q, start, nil)
		a, err, f.upstream = res.Answer, res.Err, res.Upstream
	}
	if err == nil {
		raw := a.Raw
		if raw == nil && a.Msg != nil && !mayBeLenient(a.Msg) {
			raw, _ = a.Msg.Pack()
		}
		f.ok = raw != nil && h.cache.Cache.Put(k, raw, time.Now())
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

// close cancels the refreshes in flight and waits for them to end; later
// starts refresh nothing.
func (rf *refresher) close() {
	rf.mu.Lock()
	rf.closed = true
	rf.mu.Unlock()
	rf.cancel()
	rf.wg.Wait()
}

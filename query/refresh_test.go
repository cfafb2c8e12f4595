package query

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// gatedPool answers with answer(q) once open is closed, or at once when
// open is nil; it fails while fail is set. It counts the exchanges
// running at once and the most it saw.
type gatedPool struct {
	mu      sync.Mutex // guards following
	answer  func(q *dns.Msg) *dns.Msg
	open    chan struct{}
	calls   int
	running int
	most    int
}

func (p *gatedPool) Exchange(ctx context.Context, q *transport.Query, _ time.Time, trail []actors.Attempt) actors.Result {
	p.mu.Lock()
	p.calls++
	p.running++
	p.most = max(p.most, p.running)
	answer, open := p.answer, p.open
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running--
		p.mu.Unlock()
	}()
	if open != nil {
		select {
		case <-open:
		case <-ctx.Done():
			return actors.Result{Err: ctx.Err()}
		}
	}
	m := answer(q.Msg)
	if m == nil {
		return actors.Result{Err: actors.ErrAllFailed}
	}
	return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary", Attempts: append(trail, actors.Attempt{Upstream: "primary", Outcome: actors.OutcomeAnswer})}
}

// set makes the pool answer with answer from now on, once open is closed
// (nil: at once).
func (p *gatedPool) set(answer func(q *dns.Msg) *dns.Msg, open chan struct{}) {
	p.mu.Lock()
	p.answer, p.open = answer, open
	p.mu.Unlock()
}

func (p *gatedPool) stats() (calls, most int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls, p.most
}

// answerA answers NOERROR with an A record of the TTL and address given.
func answerA(tb testing.TB, ttl int, addr string) func(q *dns.Msg) *dns.Msg {
	return func(q *dns.Msg) *dns.Msg {
		m := new(dns.Msg)
		m.SetReply(q)
		m.Answer = mustRRs(tb, fmt.Sprintf("%s %d IN A %s", q.Question[0].Name, ttl, addr))
		return m
	}
}

// answerNXDOMAIN answers NXDOMAIN without an SOA: not cacheable (RFC 2308).
func answerNXDOMAIN(q *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetRcode(q, dns.RcodeNameError)
	return m
}

// When an expired entry's refresh gets a NOERROR or NXDOMAIN answer that
// is not cached (TTL 0, no SOA), the client gets that answer, not the
// stale one, and the stale entry goes: the next client is a miss. Also
// when the answer comes after the client got the stale one.
func TestStaleGivesWayToAnUncacheableAnswer(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer func(tb testing.TB) func(q *dns.Msg) *dns.Msg
		rcode  int
	}{
		{"ttl 0", func(tb testing.TB) func(q *dns.Msg) *dns.Msg { return answerA(tb, 0, "192.0.2.2") }, dns.RcodeSuccess},
		{"nxdomain without soa", func(testing.TB) func(q *dns.Msg) *dns.Msg { return answerNXDOMAIN }, dns.RcodeNameError},
	} {
		for _, late := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, late %v", tt.name, late), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					pool := &gatedPool{answer: answerA(t, 10, "192.0.2.1")}
					h, rec := newCachedHandler(t, pool, testCacheConfig())
					q := func() *dns.Msg { return withEDNS(newQuery("example.com.", dns.TypeA), 1232, false) }
					exchange(t, h, q(), ProtoUDP)
					time.Sleep(11 * time.Second)
					fresh := func(m *dns.Msg) {
						t.Helper()
						e := rec.last()
						if m.Rcode != tt.rcode || len(ede(m)) != 0 || e.Source != SourcePool || e.Upstream != "primary" {
							t.Errorf("%s EDE %v, source %s upstream %q; want %s, no EDE, pool, primary",
								dns.RcodeToString[m.Rcode], ede(m), e.Source, e.Upstream, dns.RcodeToString[tt.rcode])
						}
						if tt.rcode == dns.RcodeSuccess && (len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.2" || m.Answer[0].Header().Ttl != 0) {
							t.Errorf("answer %v, want the fresh A 192.0.2.2 with TTL 0", m.Answer)
						}
					}
					if late {
						open := make(chan struct{})
						pool.set(tt.answer(t), open)
						m, _ := exchange(t, h, q(), ProtoUDP)
						staleEDE(t, m, 3) // the refresh is slow
						close(open)
						synctest.Wait()
					} else {
						pool.set(tt.answer(t), nil)
						m, _ := exchange(t, h, q(), ProtoUDP)
						fresh(m)
					}
					// The stale entry is gone: the next client is a
					// miss, resolved as usual.
					m, _ := exchange(t, h, q(), ProtoUDP)
					fresh(m)
					if e := rec.last(); e.CacheResult != CacheMiss {
						t.Errorf("after the uncacheable answer: cache %q, want miss (the stale entry dropped)", e.CacheResult)
					}
					if calls, _ := pool.stats(); calls != 3 {
						t.Errorf("the pool saw %d queries, want 3", calls)
					}
				})
			})
		}
	}
}

// A SERVFAIL from the refresh is a failed resolution: the stale answer
// stands, and stays.
func TestStaleStandsOverServfail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := &gatedPool{answer: answerA(t, 10, "192.0.2.1")}
		h, _ := newCachedHandler(t, pool, testCacheConfig())
		q := func() *dns.Msg { return withEDNS(newQuery("example.com.", dns.TypeA), 1232, false) }
		exchange(t, h, q(), ProtoUDP)
		time.Sleep(11 * time.Second)
		pool.set(func(q *dns.Msg) *dns.Msg { return new(dns.Msg).SetRcode(q, dns.RcodeServerFailure) }, nil)
		for range 2 {
			m, _ := exchange(t, h, q(), ProtoUDP)
			staleEDE(t, m, 3)
		}
	})
}

// fillStale caches names (each an A record of TTL 10) and lets them
// expire.
func fillStale(tb testing.TB, h *Handler, pool *gatedPool, names []string) {
	tb.Helper()
	pool.set(answerA(tb, 10, "192.0.2.1"), nil)
	for _, name := range names {
		exchange(tb, h, newQuery(name, dns.TypeA), ProtoUDP)
	}
	time.Sleep(11 * time.Second)
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%d.example.", i)
	}
	return out
}

// While every upstream is in backoff no refresh starts, for stale entries
// and prefetches alike: the stale answers go out at once and the pool
// sees nothing.
func TestNoRefreshWhileAllDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var down atomic.Bool
		pool := &gatedPool{}
		cc := testCacheConfig()
		cc.AllDown = down.Load
		h, rec := newCachedHandler(t, pool, cc)
		stale := names(200)
		fillStale(t, h, pool, stale)
		pool.set(answerA(t, 100, "192.0.2.1"), nil)
		exchange(t, h, newQuery("due.example.", dns.TypeA), ProtoUDP)
		time.Sleep(95 * time.Second) // its last 10 %
		down.Store(true)
		pool.set(answerA(t, 10, "192.0.2.1"), make(chan struct{})) // a refresh would stay in flight

		before, _ := pool.stats()
		for range 3 {
			for _, name := range stale {
				start := time.Now()
				m, _ := exchange(t, h, withEDNS(newQuery(name, dns.TypeA), 1232, false), ProtoUDP)
				if d := time.Since(start); d != 0 {
					t.Fatalf("%s: the stale answer took %v, want it at once", name, d)
				}
				staleEDE(t, m, 3)
			}
		}
		exchange(t, h, newQuery("due.example.", dns.TypeA), ProtoUDP)
		if e := rec.last(); e.Source != SourceCache {
			t.Fatalf("the prefetch's name: source %s, want cache", e.Source)
		}
		synctest.Wait()
		if calls, _ := pool.stats(); calls != before {
			t.Errorf("with every upstream in backoff the pool saw %d refreshes, want none", calls-before)
		}
	})
}

// At most MaxRefreshes refreshes run at once, however many stale names
// are asked and however slow the upstreams; at most one per key. Past the
// bound the client gets the stale answer at once; once refreshes end,
// later hits refresh again.
func TestRefreshesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 4
		pool := &gatedPool{}
		cc := testCacheConfig()
		cc.MaxRefreshes = limit
		h, _ := newCachedHandler(t, pool, cc)
		stale := names(40)
		fillStale(t, h, pool, stale)
		open := make(chan struct{})
		pool.set(answerA(t, 10, "192.0.2.1"), open)
		before, _ := pool.stats()

		var wg sync.WaitGroup
		for _, name := range stale {
			raw := mustPack(t, withEDNS(newQuery(name, dns.TypeA), 1232, false))
			for range 3 { // the same key, three clients at once
				wg.Go(func() {
					m := new(dns.Msg)
					out := serve(context.Background(), h, raw, ProtoUDP)
					if err := m.Unpack(out); err != nil {
						t.Errorf("%s: %v", name, err)
						return
					}
					staleEDE(t, m, 3)
				})
			}
		}
		wg.Wait() // every client got its stale answer: the refreshes still hang
		calls, most := pool.stats()
		if most != limit || calls-before != limit {
			t.Errorf("stale hits on %d names, 3 clients each, with slow upstreams: %d refreshes, at most %d at once; want %d and %d",
				len(stale), calls-before, most, limit, limit)
		}

		close(open)
		synctest.Wait()
		pool.set(answerA(t, 10, "192.0.2.1"), nil)
		var freshAnswers int
		for _, name := range stale {
			m, _ := exchange(t, h, withEDNS(newQuery(name, dns.TypeA), 1232, false), ProtoUDP)
			if len(ede(m)) == 0 {
				freshAnswers++
			}
		}
		if freshAnswers != len(stale) {
			t.Errorf("with the refreshes ended and the upstream quick, %d of %d names answered fresh, want all", freshAnswers, len(stale))
		}
		if _, most := pool.stats(); most > limit {
			t.Errorf("%d refreshes ran at once, want at most %d", most, limit)
		}
	})
}

// A prefetch past the bound is skipped and its claim released: a later
// hit, once a refresh has ended, prefetches.
func TestPrefetchPastTheBoundTriesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := &gatedPool{}
		cc := testCacheConfig()
		cc.MaxRefreshes = 1
		var prefetched atomic.Int64
		cc.OnPrefetch = func(bool) { prefetched.Add(1) }
		h, _ := newCachedHandler(t, pool, cc)
		fillStale(t, h, pool, []string{"stale.example."})
		pool.set(answerA(t, 100, "192.0.2.1"), nil)
		exchange(t, h, newQuery("due.example.", dns.TypeA), ProtoUDP)
		time.Sleep(95 * time.Second)

		open := make(chan struct{})
		pool.set(answerA(t, 100, "192.0.2.1"), open)
		exchange(t, h, withEDNS(newQuery("stale.example.", dns.TypeA), 1232, false), ProtoUDP) // holds the one refresh
		exchange(t, h, newQuery("due.example.", dns.TypeA), ProtoUDP)                          // skipped
		synctest.Wait()
		calls, _ := pool.stats()
		close(open)
		synctest.Wait()
		pool.set(answerA(t, 100, "192.0.2.1"), nil)
		exchange(t, h, newQuery("due.example.", dns.TypeA), ProtoUDP) // prefetches
		synctest.Wait()
		if after, _ := pool.stats(); calls != 3 || after != 4 || prefetched.Load() != 1 {
			t.Errorf("pool calls %d with the bound full, %d after; %d prefetches; want 3, 4 and 1", calls, after, prefetched.Load())
		}
	})
}

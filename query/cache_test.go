package query

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// The cache policy of the tests: the shipped defaults of spec section 2.
func testCacheConfig() CacheConfig {
	return CacheConfig{
		Cache: cache.New(cache.Config{
			MaxBytes: 1 << 20, MaxTTL: 86400 * time.Second, NegativeMaxTTL: time.Hour,
			FailureTTL: 5 * time.Second, StaleMaxAge: 86400 * time.Second,
		}),
		Prefetch:           true,
		ServeStale:         true,
		StaleAnswerTTL:     30 * time.Second,
		StaleClientTimeout: 1800 * time.Millisecond,
	}
}

// newCachedHandler is a handler with the test cache in front of pool,
// closed when the test ends.
func newCachedHandler(tb testing.TB, pool Pool, cc CacheConfig) (*Handler, *recorder) {
	tb.Helper()
	h, rec := newTestHandler(tb, HandlerConfig{Pool: pool, Cache: cc})
	tb.Cleanup(h.Close)
	return h, rec
}

// lastEntry is the recorder's newest entry.
func (r *recorder) last() Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.entries[len(r.entries)-1]
}

// A hit never reaches the pool, carries the client's ID and spelling, and
// its TTLs go down with the time it spent in the cache.
func TestCacheHitTTLsGoDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := answeringPool(t, "example.com. 300 IN A 192.0.2.1")
		h, rec := newCachedHandler(t, pool, testCacheConfig())
		exchange(t, h, newQuery("example.com.", dns.TypeA), ProtoUDP)
		if e := rec.last(); e.Source != SourcePool || e.CacheResult != CacheMiss {
			t.Fatalf("first query: source %q, cache %q; want pool and miss", e.Source, e.CacheResult)
		}
		time.Sleep(100 * time.Second)
		q := newQuery("EXAMPLE.com.", dns.TypeA)
		q.Id = 77
		m, _ := exchange(t, h, q, ProtoUDP)
		if pool.Calls() != 1 {
			t.Fatalf("the pool saw %d queries, want 1", pool.Calls())
		}
		checkEcho(t, q, m)
		if len(m.Answer) != 1 || m.Answer[0].Header().Ttl != 200 {
			t.Errorf("answer %v, want one A with TTL 200", m.Answer)
		}
		if e := rec.last(); e.Source != SourceCache || e.CacheResult != CacheHit || e.Upstream != "" {
			t.Errorf("hit: source %q, cache %q, upstream %q; want cache, hit, none", e.Source, e.CacheResult, e.Upstream)
		}
	})
}

// DO and CD are part of the key: a query with either bit is not answered
// with what a query without it got.
func TestCacheKeysDOAndCDApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := answeringPool(t, "example.com. 300 IN A 192.0.2.1")
		h, _ := newCachedHandler(t, pool, testCacheConfig())
		plain := func() *dns.Msg { return withEDNS(newQuery("example.com.", dns.TypeA), 1232, false) }
		do := func() *dns.Msg { return withEDNS(newQuery("example.com.", dns.TypeA), 1232, true) }
		cd := func() *dns.Msg { q := plain(); q.CheckingDisabled = true; return q }
		for i, q := range []*dns.Msg{plain(), do(), cd(), plain(), do(), cd()} {
			m, _ := exchange(t, h, q, ProtoUDP)
			if want := min(i+1, 3); pool.Calls() != want {
				t.Fatalf("query %d: the pool saw %d queries, want %d", i, pool.Calls(), want)
			}
			if opt := m.IsEdns0(); opt == nil || opt.Do() != q.IsEdns0().Do() || m.CheckingDisabled != q.CheckingDisabled {
				t.Errorf("query %d: answer OPT %v CD %v does not echo the query's", i, opt, m.CheckingDisabled)
			}
		}
	})
}

// negativePool answers NXDOMAIN, with an SOA (TTL 900, MINIMUM 60) when
// soa is set.
func negativePool(tb testing.TB, soa bool) *fakePool {
	var auth []dns.RR
	if soa {
		auth = mustRRs(tb, "example.com. 900 IN SOA ns.example.com. host.example.com. 1 7200 900 1209600 60")
	}
	return &fakePool{OnExchange: func(_ context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
		m := new(dns.Msg)
		m.SetRcode(q, dns.RcodeNameError)
		m.Ns = auth
		return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary"}
	}}
}

// An NXDOMAIN with an SOA lives min(SOA TTL, MINIMUM) (RFC 2308); one
// without an SOA is not cached at all.
func TestCacheNegativeAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		withSOA := negativePool(t, true)
		h, _ := newCachedHandler(t, withSOA, testCacheConfig())
		exchange(t, h, newQuery("nx.example.com.", dns.TypeA), ProtoUDP)
		time.Sleep(50 * time.Second) // before the last 10 %, where a hit would prefetch
		m, _ := exchange(t, h, newQuery("nx.example.com.", dns.TypeA), ProtoUDP)
		synctest.Wait()
		if withSOA.Calls() != 1 || m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 || m.Ns[0].Header().Ttl != 10 {
			t.Fatalf("after 50 s: %d upstream queries, %s, authority %v; want 1, NXDOMAIN, the SOA with TTL 10", withSOA.Calls(), dns.RcodeToString[m.Rcode], m.Ns)
		}
		time.Sleep(10 * time.Second)
		exchange(t, h, newQuery("nx.example.com.", dns.TypeA), ProtoUDP)
		if withSOA.Calls() != 2 {
			t.Fatalf("after 60 s (the SOA's MINIMUM): %d upstream queries, want 2", withSOA.Calls())
		}

		without := negativePool(t, false)
		h, _ = newCachedHandler(t, without, testCacheConfig())
		exchange(t, h, newQuery("nx.example.com.", dns.TypeA), ProtoUDP)
		exchange(t, h, newQuery("nx.example.com.", dns.TypeA), ProtoUDP)
		if without.Calls() != 2 {
			t.Errorf("an NXDOMAIN without SOA was cached: %d upstream queries, want 2", without.Calls())
		}
	})
}

// A failure of the pool is remembered for failure_ttl_s (RFC 9520): the
// same question is answered SERVFAIL with EDE 13 and nothing goes
// upstream; afterwards the pool is asked again.
func TestCacheRemembersFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := failingPool(actors.Result{Err: actors.ErrAllFailed, Attempts: []actors.Attempt{{Upstream: "primary", Outcome: actors.OutcomePeerFault}}})
		h, rec := newCachedHandler(t, pool, testCacheConfig())
		q := func() *dns.Msg { return withEDNS(newQuery("down.example.", dns.TypeA), 1232, false) }
		m, _ := exchange(t, h, q(), ProtoUDP)
		if got := ede(m); len(got) != 1 || got[0].InfoCode != 22 {
			t.Fatalf("the failure itself: EDE %v, want 22", got)
		}
		time.Sleep(4 * time.Second)
		m, _ = exchange(t, h, q(), ProtoUDP)
		if got := ede(m); m.Rcode != dns.RcodeServerFailure || len(got) != 1 || got[0].InfoCode != 13 || pool.Calls() != 1 {
			t.Fatalf("remembered: %s EDE %v with %d pool queries; want SERVFAIL, EDE 13, 1", dns.RcodeToString[m.Rcode], got, pool.Calls())
		}
		if e := rec.last(); e.Source != SourceCache || e.CacheResult != CacheCachedFailure {
			t.Errorf("source %q cache %q, want cache and cached_failure", e.Source, e.CacheResult)
		}
		time.Sleep(time.Second)
		exchange(t, h, q(), ProtoUDP)
		if pool.Calls() != 2 {
			t.Errorf("after failure_ttl_s the pool saw %d queries, want 2", pool.Calls())
		}
	})
}

// switchablePool answers with an A record of TTL 10 until fail is set;
// then it fails (ErrAllFailed) or, with stall, blocks until released.
type switchablePool struct {
	*fakePool
	mode    chan string // "answer", "fail", "stall"
	release chan struct{}
}

func newSwitchablePool(tb testing.TB, rcode int) *switchablePool {
	p := &switchablePool{mode: make(chan string, 1), release: make(chan struct{})}
	p.mode <- "answer"
	rrs := mustRRs(tb, "example.com. 10 IN A 192.0.2.1")
	soa := mustRRs(tb, "example.com. 10 IN SOA ns.example.com. host.example.com. 1 7200 900 1209600 10")
	p.fakePool = &fakePool{OnExchange: func(ctx context.Context, q *dns.Msg, _ []actors.Attempt) actors.Result {
		mode := <-p.mode
		p.mode <- mode
		switch mode {
		case "fail":
			return actors.Result{Err: actors.ErrAllFailed}
		case "stall":
			select {
			case <-p.release:
			case <-ctx.Done():
				return actors.Result{Err: ctx.Err()}
			}
		}
		m := new(dns.Msg)
		m.SetRcode(q, rcode)
		if rcode == dns.RcodeSuccess {
			m.Answer = rrs
		} else {
			m.Ns = soa
		}
		return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary"}
	}}
	return p
}

func (p *switchablePool) set(mode string) { <-p.mode; p.mode <- mode }

// staleEDE checks that m is a stale answer: TTL 30 and EDE code.
func staleEDE(tb testing.TB, m *dns.Msg, code uint16) {
	tb.Helper()
	rrs := append(append([]dns.RR(nil), m.Answer...), m.Ns...)
	if len(rrs) != 1 || rrs[0].Header().Ttl != 30 {
		tb.Errorf("records %v, want one with the stale TTL 30", rrs)
	}
	if got := ede(m); len(got) != 1 || got[0].InfoCode != code {
		tb.Errorf("EDE %v, want %d", got, code)
	}
}

// An expired entry whose resolution fails is served stale at once: TTL
// stale_answer_ttl_s, EDE 3 (19 for NXDOMAIN); no failure is remembered
// over it.
func TestCacheServesStaleWhenResolutionFails(t *testing.T) {
	for _, tt := range []struct {
		rcode int
		code  uint16
	}{{dns.RcodeSuccess, 3}, {dns.RcodeNameError, 19}} {
		synctest.Test(t, func(t *testing.T) {
			pool := newSwitchablePool(t, tt.rcode)
			h, rec := newCachedHandler(t, pool, testCacheConfig())
			q := func() *dns.Msg { return withEDNS(newQuery("example.com.", dns.TypeA), 1232, false) }
			exchange(t, h, q(), ProtoUDP)
			time.Sleep(11 * time.Second)
			pool.set("fail")
			start := time.Now()
			m, _ := exchange(t, h, q(), ProtoUDP)
			if d := time.Since(start); d != 0 {
				t.Errorf("the stale answer took %v, want none: the refresh failed at once", d)
			}
			staleEDE(t, m, tt.code)
			if e := rec.last(); e.Source != SourceStale || e.CacheResult != CacheStale {
				t.Errorf("source %q cache %q, want stale and stale", e.Source, e.CacheResult)
			}
			m, _ = exchange(t, h, q(), ProtoUDP)
			staleEDE(t, m, tt.code) // still stale: the failure did not replace it
		})
	}
}

// A slow resolution of an expired entry gives the client the stale answer
// after exactly stale_client_timeout_ms; the resolution goes on and
// refreshes the entry, and the next client gets the fresh answer.
func TestCacheStaleClientTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := newSwitchablePool(t, dns.RcodeSuccess)
		h, _ := newCachedHandler(t, pool, testCacheConfig())
		q := func() *dns.Msg { return withEDNS(newQuery("example.com.", dns.TypeA), 1232, false) }
		exchange(t, h, q(), ProtoUDP)
		time.Sleep(11 * time.Second)
		pool.set("stall")
		start := time.Now()
		m, _ := exchange(t, h, q(), ProtoUDP)
		if d := time.Since(start); d != 1800*time.Millisecond {
			t.Errorf("the stale answer came after %v, want exactly 1.8s", d)
		}
		staleEDE(t, m, 3)
		pool.set("answer")
		close(pool.release)
		synctest.Wait() // the refresh stores its answer
		m, _ = exchange(t, h, q(), ProtoUDP)
		if len(m.Answer) != 1 || m.Answer[0].Header().Ttl != 10 || len(ede(m)) != 0 {
			t.Errorf("after the refresh: %v EDE %v, want the fresh answer, TTL 10, no EDE", m.Answer, ede(m))
		}
		if pool.Calls() != 2 {
			t.Errorf("the pool saw %d queries, want 2 (the first, the refresh)", pool.Calls())
		}
	})
}

// While every upstream is in backoff the stale answer goes out at once.
func TestCacheStaleAtOnceWhenAllDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := newSwitchablePool(t, dns.RcodeSuccess)
		cc := testCacheConfig()
		cc.AllDown = func() bool { return true }
		h, _ := newCachedHandler(t, pool, cc)
		exchange(t, h, newQuery("example.com.", dns.TypeA), ProtoUDP)
		time.Sleep(11 * time.Second)
		pool.set("stall")
		start := time.Now()
		m, _ := exchange(t, h, withEDNS(newQuery("example.com.", dns.TypeA), 1232, false), ProtoUDP)
		if d := time.Since(start); d != 0 {
			t.Errorf("took %v, want the stale answer at once", d)
		}
		staleEDE(t, m, 3)
		close(pool.release)
	})
}

// A hit in the last 10 % of an entry's lifetime starts one background
// refresh, however many hits follow while it runs; its result replaces the
// entry, and the client that started it got the cached answer at once.
func TestCachePrefetchOncePerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := newSwitchablePool(t, dns.RcodeSuccess)
		var answered, failed int
		cc := testCacheConfig()
		cc.OnPrefetch = func(ok bool) {
			if ok {
				answered++
			} else {
				failed++
			}
		}
		h, rec := newCachedHandler(t, pool, cc)
		q := func() *dns.Msg { return newQuery("example.com.", dns.TypeA) }
		exchange(t, h, q(), ProtoUDP)
		time.Sleep(8 * time.Second) // 80 %: no prefetch yet
		exchange(t, h, q(), ProtoUDP)
		synctest.Wait()
		if pool.Calls() != 1 {
			t.Fatalf("a hit at 80 %% of the TTL went upstream: %d queries", pool.Calls())
		}
		time.Sleep(time.Second + 500*time.Millisecond) // 95 %
		pool.set("stall")
		for range 5 {
			start := time.Now()
			exchange(t, h, q(), ProtoUDP)
			if d := time.Since(start); d != 0 {
				t.Fatalf("a hit waited %v for the prefetch", d)
			}
			if e := rec.last(); e.Source != SourceCache {
				t.Fatalf("source %q during the prefetch, want cache", e.Source)
			}
		}
		synctest.Wait()
		if pool.Calls() != 2 {
			t.Fatalf("5 hits in the last 10 %% started %d refreshes, want 1", pool.Calls()-1)
		}
		pool.set("answer")
		close(pool.release)
		synctest.Wait()
		if answered != 1 || failed != 0 {
			t.Errorf("prefetches: %d answered, %d failed; want 1 and 0", answered, failed)
		}
		m, _ := exchange(t, h, q(), ProtoUDP)
		if m.Answer[0].Header().Ttl != 10 {
			t.Errorf("after the prefetch the TTL reads %d, want a fresh 10", m.Answer[0].Header().Ttl)
		}
	})
}

package query

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire/server"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// validatingPool answers like a validating resolver (Unbound): with AD
// when the query set AD or DO (RFC 6840 5.7), an A record of TTL 10, or
// fails while fail is set. It counts the queries it saw without AD.
type validatingPool struct {
	*fakePool
	fail      atomic.Bool
	withoutAD atomic.Int64
}

func newValidatingPool(tb testing.TB) *validatingPool {
	p := &validatingPool{}
	p.fakePool = &fakePool{OnExchange: func(_ context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
		if !q.AuthenticatedData {
			p.withoutAD.Add(1)
		}
		if p.fail.Load() {
			return actors.Result{Err: actors.ErrAllFailed}
		}
		do := q.IsEdns0() != nil && q.IsEdns0().Do()
		m := new(dns.Msg)
		m.SetReply(q)
		m.RecursionAvailable = true
		m.AuthenticatedData = q.AuthenticatedData || do
		m.Answer = mustRRs(tb, q.Question[0].Name+" 10 IN A 192.0.2.1")
		if q.IsEdns0() != nil {
			m.SetEdns0(1232, do)
		}
		return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary", Attempts: append(trail, actors.Attempt{Upstream: "primary", Outcome: actors.OutcomeAnswer})}
	}}
	return p
}

// adQuery is a query for name with the AD bit ad and, when do is set, an
// OPT record with DO.
func adQuery(name string, ad, do bool) *dns.Msg {
	q := newQuery(name, dns.TypeA)
	q.AuthenticatedData = ad
	if do {
		withEDNS(q, 1232, true)
	}
	return q
}

// serveFast answers q on the fast path, as a listener does, and unpacks
// the answer; handled false when it needs the worker.
func serveFast(tb testing.TB, h *Handler, q *dns.Msg) (*dns.Msg, bool) {
	tb.Helper()
	req := &server.Request{Raw: mustPack(tb, q), Proto: ProtoUDP, Client: testClient, Answer: make([]byte, 0, 4096)}
	out, handled := h.ServeFast(req)
	if !handled {
		req.Pending.Abandon()
		return nil, false
	}
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil {
		tb.Fatal(err)
	}
	return m, true
}

// An answer carries AD only when the upstream set it and the client set
// AD or DO (spec section 10), fresh or cached, on the fast path and the
// worker's, whichever client filled the entry; upstreams always see AD.
func TestADFollowsTheClientThroughTheCache(t *testing.T) {
	t.Parallel()
	for _, kind := range poolKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			pool := newValidatingPool(t)
			h, rec := newCachedHandler(t, kind.wrap(pool.fakePool), testCacheConfig())
			for _, do := range []bool{false, true} {
				for _, firstAD := range []bool{false, true} {
					name := fmt.Sprintf("do%v-ad%v.example.", do, firstAD)
					for i, ad := range []bool{firstAD, !firstAD, firstAD} {
						want := ad || do
						m, _ := exchange(t, h, adQuery(name, ad, do), ProtoUDP)
						if m.AuthenticatedData != want {
							t.Errorf("%s query %d (AD %v), source %s: AD %v, want %v", name, i, ad, rec.last().Source, m.AuthenticatedData, want)
						}
						m, handled := serveFast(t, h, adQuery(name, ad, do))
						if !handled || m.AuthenticatedData != want {
							t.Errorf("%s query %d (AD %v) on the fast path: handled %v, AD %v, want a hit with AD %v", name, i, ad, handled, m != nil && m.AuthenticatedData, want)
						}
					}
				}
			}
			if pool.Calls() != 4 || pool.withoutAD.Load() != 0 {
				t.Errorf("the pool saw %d queries, %d without AD; want 4 (one per name), none without AD", pool.Calls(), pool.withoutAD.Load())
			}
		})
	}
}

// A stale answer follows the AD rule as any cached one; the refresh asks
// with AD; answers nxdnsd makes (a remembered failure, a local record)
// never carry AD.
func TestADStaleRefreshAndOwnAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := newValidatingPool(t)
		h, rec := newCachedHandler(t, pool.fakePool, testCacheConfig())
		exchange(t, h, adQuery("example.com.", true, false), ProtoUDP)
		time.Sleep(11 * time.Second)
		pool.fail.Store(true)
		for _, ad := range []bool{false, true} {
			m, _ := exchange(t, h, withEDNS(adQuery("example.com.", ad, false), 1232, false), ProtoUDP)
			if e := rec.last(); e.Source != SourceStale || m.AuthenticatedData != ad {
				t.Errorf("stale, client AD %v: source %s, AD %v; want stale, AD %v", ad, e.Source, m.AuthenticatedData, ad)
			}
		}
		if pool.Calls() < 2 || pool.withoutAD.Load() != 0 {
			t.Errorf("the pool saw %d queries, %d without AD; want the refreshes, with AD", pool.Calls(), pool.withoutAD.Load())
		}

		m, _ := exchange(t, h, adQuery("down.example.", true, true), ProtoUDP)
		m2, _ := exchange(t, h, adQuery("down.example.", true, true), ProtoUDP)
		if e := rec.last(); e.CacheResult != CacheCachedFailure || m.AuthenticatedData || m2.AuthenticatedData {
			t.Errorf("a failure and a remembered one (%s): AD %v and %v, want none", e.CacheResult, m.AuthenticatedData, m2.AuthenticatedData)
		}
		m, _ = exchange(t, h, adQuery("localhost.", true, true), ProtoUDP)
		if m.AuthenticatedData {
			t.Error("a special-use name's answer carries AD")
		}
	})
}

// A prefetch asks its upstream with AD, whatever the client that started
// it set.
func TestADPrefetchAsksWithAD(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := newValidatingPool(t)
		h, _ := newCachedHandler(t, pool.fakePool, testCacheConfig())
		exchange(t, h, adQuery("example.com.", false, false), ProtoUDP)
		time.Sleep(9500 * time.Millisecond) // the last 10 %
		exchange(t, h, adQuery("example.com.", false, false), ProtoUDP)
		synctest.Wait()
		if pool.Calls() != 2 || pool.withoutAD.Load() != 0 {
			t.Errorf("the pool saw %d queries, %d without AD; want 2 (the prefetch), none without AD", pool.Calls(), pool.withoutAD.Load())
		}
		m, _ := exchange(t, h, adQuery("example.com.", true, false), ProtoUDP)
		if !m.AuthenticatedData {
			t.Error("the prefetched answer, to a client with AD, has no AD")
		}
	})
}

package query

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/rebind"
)

// edeOf returns the Extended DNS Errors of m.
func edeOf(m *dns.Msg) []*dns.EDNS0_EDE {
	var out []*dns.EDNS0_EDE
	if o := m.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok {
				out = append(out, e)
			}
		}
	}
	return out
}

// A pool answer with a private address loses it, on the message path and
// the byte path alike, with EDE 15 and Entry.Rebind; a public one goes as
// it came; a forward zone's private answer is not touched (spec section
// 15). Mutation check: removing the protect call from finish fails every
// "private" case.
func TestRebindProtection(t *testing.T) {
	t.Parallel()
	for _, kind := range poolKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			pool := answeringPool(t, "evil.example. 300 IN A 192.168.1.1", "evil.example. 300 IN A 93.184.215.14")
			h, rec := newTestHandler(t, HandlerConfig{
				Pool:   kind.wrap(pool),
				Rebind: rebind.New(true, nil),
				Zones:  []Zone{{Name: "corp.example.", Resolver: "10.0.0.53:53", Client: resolverAnswering(t, 0, "nas.corp.example. 300 IN A 10.0.0.5")}},
			})
			m, _ := exchange(t, h, withEDNS(newQuery("evil.example.", dns.TypeA), 1232, false), ProtoUDP)
			if got := rrStrings(m.Answer); len(got) != 1 || got[0] != "evil.example.\t300\tIN\tA\t93.184.215.14" {
				t.Errorf("private answer: %v, want the public address alone", got)
			}
			if ede := edeOf(m); len(ede) != 1 || ede[0].InfoCode != rebind.EDECode || ede[0].ExtraText != rebind.EDEText {
				t.Errorf("EDE %v, want 15 %q", ede, rebind.EDEText)
			}
			if e := rec.last(); !e.Rebind || e.Source != SourcePool {
				t.Errorf("entry rebind %v source %q, want true, pool", e.Rebind, e.Source)
			}

			m, _ = exchange(t, h, withEDNS(newQuery("nas.corp.example.", dns.TypeA), 1232, false), ProtoUDP)
			if len(m.Answer) != 1 || len(edeOf(m)) != 0 || rec.last().Rebind {
				t.Errorf("forward zone's answer %v (EDE %v, rebind %v), want its private address untouched", m.Answer, edeOf(m), rec.last().Rebind)
			}
		})
	}
}

// From the cache, a private answer is stripped on every hit, and a public
// one goes as it was stored; the entry of a public answer is noted
// public at its first hit (cache.Hit.MarkPublic), so that later hits do
// not walk its bytes, and the entry of a private one never is. Mutation
// check: marking every entry public lets the private address through
// from the first hit on.
func TestRebindCachedHits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		records []string
		private bool
	}{
		{"evil.example.", []string{"evil.example. 300 IN A 192.168.1.1", "evil.example. 300 IN A 93.184.215.14"}, true},
		{"good.example.", []string{"good.example. 300 IN A 93.184.215.14"}, false},
	} {
		h, rec := newTestHandler(t, HandlerConfig{Pool: answeringPool(t, tc.records...), Cache: testCacheConfig(), Rebind: rebind.New(true, nil)})
		exchange(t, h, newQuery(tc.name, dns.TypeA), ProtoUDP) // the pool's answer, cached
		for i := range 3 {
			m, handled := serveFast(t, h, newQuery(tc.name, dns.TypeA))
			if !handled {
				t.Fatalf("%s, hit %d: not answered from the cache", tc.name, i+1)
			}
			if got := rrStrings(m.Answer); len(got) != 1 || !strings.HasSuffix(got[0], "93.184.215.14") || rec.last().Rebind != tc.private {
				t.Errorf("%s, hit %d: %v (rebind %v), want the public address alone (rebind %v)", tc.name, i+1, got, rec.last().Rebind, tc.private)
			}
		}
		hit, st := h.cache.Cache.Get(cache.Key{Name: tc.name, Type: dns.TypeA, Class: dns.ClassINET}, time.Now())
		if st != cache.Fresh || hit.Public() == tc.private {
			t.Errorf("%s: state %v, noted public %v; want fresh, %v", tc.name, st, hit.Public(), !tc.private)
		}
	}
}

// The reverse name of a private address that no forward zone covers is
// answered here, NXDOMAIN with the zone's SOA, without asking the pool,
// when the pool has no router; with one, only the router is asked; with
// a forward zone covering it, the zone is (spec section 15).
func TestPrivateReverseNames(t *testing.T) {
	t.Parallel()
	const name = "50.1.168.192.in-addr.arpa."
	t.Run("no router", func(t *testing.T) {
		t.Parallel()
		pool := answeringPool(t)
		h, rec := newTestHandler(t, HandlerConfig{Pool: pool, Cache: testCacheConfig()})
		t.Cleanup(h.Close)
		for range 2 {
			m, _ := exchange(t, h, newQuery(name, dns.TypePTR), ProtoUDP)
			if m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 || m.Ns[0].Header().Name != "168.192.in-addr.arpa." {
				t.Fatalf("rcode %s authority %v, want NXDOMAIN with 168.192.in-addr.arpa.'s SOA", dns.RcodeToString[m.Rcode], m.Ns)
			}
			if e := rec.last(); e.Source != SourceSpecial || e.CacheResult != "" {
				t.Errorf("source %q cache %q, want special, before the cache", e.Source, e.CacheResult)
			}
		}
		if pool.Calls() != 0 {
			t.Errorf("the pool was asked %d times, want never", pool.Calls())
		}
	})
	t.Run("router", func(t *testing.T) {
		t.Parallel()
		pool := answeringPool(t)
		router := answeringPool(t, name+" 300 IN PTR tablet.lan.")
		h, rec := newTestHandler(t, HandlerConfig{Pool: pool, Routers: router})
		m, _ := exchange(t, h, newQuery(name, dns.TypePTR), ProtoUDP)
		if len(m.Answer) != 1 || router.Calls() != 1 || pool.Calls() != 0 || rec.last().Source != SourcePool {
			t.Errorf("answer %v, router asked %d, pool %d, source %q; want the router's PTR, asked once, the pool never",
				m.Answer, router.Calls(), pool.Calls(), rec.last().Source)
		}
		exchange(t, h, newQuery("example.com.", dns.TypeA), ProtoUDP)
		if pool.Calls() != 1 || router.Calls() != 1 {
			t.Errorf("a public name: pool asked %d, router %d; want the pool", pool.Calls(), router.Calls())
		}
	})
	t.Run("forward zone", func(t *testing.T) {
		t.Parallel()
		pool := answeringPool(t)
		zone := resolverAnswering(t, 0, name+" 300 IN PTR tablet.lan.")
		h, rec := newTestHandler(t, HandlerConfig{Pool: pool, Zones: []Zone{{Name: "168.192.in-addr.arpa.", Resolver: "192.168.1.1:53", Client: zone}}})
		m, _ := exchange(t, h, newQuery(name, dns.TypePTR), ProtoUDP)
		if len(m.Answer) != 1 || zone.Calls() != 1 || pool.Calls() != 0 || rec.last().Source != SourceForwardZone {
			t.Errorf("answer %v, zone asked %d, pool %d, source %q; want the zone's", m.Answer, zone.Calls(), pool.Calls(), rec.last().Source)
		}
	})
}

// A stripped answer never carries AD (spec section 10): its RRSIGs are
// gone, so nothing vouches for what is left; an untouched one keeps it.
func TestRebindClearsAD(t *testing.T) {
	t.Parallel()
	for _, kind := range poolKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			evil := answeringPool(t, "evil.example. 300 IN A 10.1.2.3", "evil.example. 300 IN A 93.184.215.14")
			good := answeringPool(t, "good.example. 300 IN A 93.184.215.14", "good.example. 300 IN A 93.184.215.15")
			pool := &fakePool{OnExchange: func(ctx context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
				res := good.OnExchange(ctx, q, trail)
				if q.Question[0].Name == "evil.example." {
					res = evil.OnExchange(ctx, q, trail)
				}
				res.Answer.Msg.AuthenticatedData = true
				return res
			}}
			h, _ := newTestHandler(t, HandlerConfig{Pool: kind.wrap(pool), Rebind: rebind.New(true, nil)})
			m, _ := exchange(t, h, withEDNS(newQuery("evil.example.", dns.TypeA), 1232, true), ProtoUDP)
			if m.AuthenticatedData || len(m.Answer) != 1 {
				t.Errorf("stripped: AD %v, %d answers; want no AD, the public address", m.AuthenticatedData, len(m.Answer))
			}
			m, _ = exchange(t, h, withEDNS(newQuery("good.example.", dns.TypeA), 1232, true), ProtoUDP)
			if !m.AuthenticatedData || len(m.Answer) != 2 {
				t.Errorf("untouched: AD %v, %d answers; want AD kept, both addresses", m.AuthenticatedData, len(m.Answer))
			}
		})
	}
}

package query

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/server"
)

// ServeFast answers on the listener's goroutine what needs no resolver —
// special names, local records, fresh cache hits — and hands the rest on in
// req.Pending; ServeDNS then goes on from that State with a copy of the
// query's bytes (the listener's buffer is reused at once) and answers as
// if it had done it all.
func TestServeFastHandsOverWhatNeedsAResolver(t *testing.T) {
	t.Parallel()
	pool := answeringPool(t, "example.com. 300 IN A 192.0.2.1")
	h, rec := newCachedHandler(t, pool, testCacheConfig())
	fast := func(q *dns.Msg) (*server.Request, []byte, bool) {
		t.Helper()
		req := &server.Request{Raw: mustPack(t, q), Proto: ProtoUDP, Client: testClient, Answer: make([]byte, 0, 4096)}
		out, handled := h.ServeFast(req)
		return req, out, handled
	}

	if _, out, handled := fast(newQuery("localhost.", dns.TypeA)); !handled || out == nil {
		t.Fatal("a special-use name was not answered on the fast path")
	}
	q := newQuery("Example.COM.", dns.TypeA)
	req, _, handled := fast(q)
	if handled || req.Pending == nil || pool.Calls() != 0 {
		t.Fatalf("a miss: handled %v, state %v, pool calls %d; want not handled, a state, none", handled, req.Pending, pool.Calls())
	}
	// The worker's copy of the bytes; the listener's buffer is reused.
	worker := &server.Request{Raw: bytes.Clone(req.Raw), Proto: ProtoUDP, Client: testClient, Pending: req.Pending}
	clear(req.Raw)
	out := h.ServeDNS(context.Background(), worker)
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil {
		t.Fatal(err)
	}
	checkEcho(t, q, m)
	if len(m.Answer) != 1 || pool.Calls() != 1 || worker.Pending != nil {
		t.Fatalf("resumed: %v, pool calls %d, state left %v; want the answer, 1, nil", m.Answer, pool.Calls(), worker.Pending)
	}
	if e := rec.last(); e.Source != SourcePool || e.CacheResult != CacheMiss || e.QName != "Example.COM." {
		t.Errorf("resumed entry: %+v", e)
	}

	req, out, handled = fast(newQuery("example.com.", dns.TypeA))
	if !handled || out == nil || &out[0] != &req.Answer[:1][0] || pool.Calls() != 1 {
		t.Fatalf("a hit: handled %v, built in the listener's buffer %v, pool calls %d", handled, out != nil && &out[0] == &req.Answer[:1][0], pool.Calls())
	}
	if e := rec.last(); e.Source != SourceCache {
		t.Errorf("hit entry source %q, want cache", e.Source)
	}
}

// A cache hit on the fast path allocates one object: the question's name,
// which the entry hands to the hooks.
func TestCacheHitAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	pool := answeringPool(t, "www.example.com. 300 IN A 192.0.2.1")
	h, err := NewHandler(HandlerConfig{Pool: pool, Cache: testCacheConfig(), Hooks: HooksFunc(func(*Entry) {})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	raw := mustPack(t, withEDNS(newQuery("www.example.com.", dns.TypeA), 1232, false))
	req := &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Answer: make([]byte, 0, 4096)}
	if _, handled := h.ServeFast(req); handled {
		t.Fatal("the first query was answered without the pool")
	}
	h.ServeDNS(context.Background(), &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Pending: req.Pending})
	allocs := testing.AllocsPerRun(1000, func() {
		req.Pending = nil
		if out, handled := h.ServeFast(req); !handled || out == nil {
			t.Fatal("not a hit")
		}
	})
	if allocs > 1 {
		t.Errorf("a cache hit allocates %v objects, want at most 1", allocs)
	}
}

// BenchmarkServeFastHit is a cache hit on the listener's fast path, raw
// query in, raw answer out in the listener's buffer, hooks that do
// nothing.
func BenchmarkServeFastHit(b *testing.B) {
	pool := answeringPool(b, "www.example.com. 300 IN A 192.0.2.1", "www.example.com. 300 IN A 192.0.2.2")
	h, err := NewHandler(HandlerConfig{Pool: pool, Cache: testCacheConfig(), Hooks: HooksFunc(func(*Entry) {})})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(h.Close)
	raw := mustPack(b, withEDNS(newQuery("www.example.com.", dns.TypeA), 1232, false))
	req := &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Answer: make([]byte, 0, 4096)}
	h.ServeFast(req)
	h.ServeDNS(context.Background(), &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Pending: req.Pending})
	b.ReportAllocs()
	for b.Loop() {
		req.Pending = nil
		if _, handled := h.ServeFast(req); !handled {
			b.Fatal("not a hit")
		}
	}
}

// countingHold is a Hold that counts its releases.
type countingHold struct{ released atomic.Int32 }

func (c *countingHold) Release() { c.released.Add(1) }

// ServeFastHolding hands a query on with its hold and releases the hold
// once, when the worker has served the query or the listener abandoned
// it, never before; a query it answers leaves the hold to the caller.
func TestServeFastHoldingReleasesOnce(t *testing.T) {
	t.Parallel()
	pool := answeringPool(t, "example.com. 300 IN A 192.0.2.1")
	h, _ := newCachedHandler(t, pool, testCacheConfig())
	fast := func(name string, hold Hold) (*server.Request, bool) {
		t.Helper()
		req := &server.Request{Raw: mustPack(t, newQuery(name, dns.TypeA)), Proto: ProtoUDP, Client: testClient, Answer: make([]byte, 0, 4096)}
		_, handled := h.ServeFastHolding(req, hold)
		return req, handled
	}

	answered := new(countingHold)
	if req, handled := fast("localhost.", answered); !handled || req.Pending != nil || answered.released.Load() != 0 {
		t.Fatalf("answered on the fast path: handled %v, pending %v, released %d; want handled, none, 0",
			handled, req.Pending, answered.released.Load())
	}

	served := new(countingHold)
	req, handled := fast("example.com.", served)
	if handled || req.Pending == nil || served.released.Load() != 0 {
		t.Fatalf("handed on: handled %v, pending %v, released %d; want not handled, pending, 0",
			handled, req.Pending, served.released.Load())
	}
	worker := &server.Request{Raw: bytes.Clone(req.Raw), Proto: ProtoUDP, Client: testClient, Pending: req.Pending}
	if out := worker.Pending.Serve(context.Background(), worker); out == nil || served.released.Load() != 1 {
		t.Fatalf("served: answer %v, released %d times; want an answer, once", out != nil, served.released.Load())
	}

	abandoned := new(countingHold)
	req, handled = fast("other.example.com.", abandoned)
	if handled || req.Pending == nil {
		t.Fatalf("handed on: handled %v, pending %v", handled, req.Pending)
	}
	req.Pending.Abandon()
	if n := abandoned.released.Load(); n != 1 || pool.Calls() != 1 {
		t.Fatalf("abandoned: released %d times, pool calls %d; want once, 1 (the served query's)", n, pool.Calls())
	}
}

package query

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// instantPool answers at once with a fresh message around shared, never
// modified records, as cheaply as a pool can hand over an answer: a
// message, its additional section and its OPT (3 allocations, counted in
// the benchmark's figures).
type instantPool struct {
	answer []dns.RR
}

func (p *instantPool) Exchange(_ context.Context, q *transport.Query, _ time.Time, trail []actors.Attempt) actors.Result {
	m := &dns.Msg{
		MsgHdr:   dns.MsgHdr{Id: q.Msg.Id, Response: true, RecursionDesired: true, RecursionAvailable: true},
		Question: q.Msg.Question,
		Answer:   p.answer,
	}
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(1232)
	m.Extra = []dns.RR{opt}
	trail = append(trail, actors.Attempt{Upstream: "primary", Outcome: actors.OutcomeAnswer})
	return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary", Attempts: trail}
}

// BenchmarkServePool measures the query path around the pool: raw query in
// (A with EDNS), raw answer out (two A records), through an instant pool
// that answers with a message. The answer buffer is the one a UDP listener
// lends, which a message answer leaves unused.
func BenchmarkServePool(b *testing.B) {
	pool := &instantPool{answer: mustRRs(b,
		"www.example.com. 300 IN A 93.184.215.14",
		"www.example.com. 300 IN A 93.184.215.15")}
	h, err := NewHandler(HandlerConfig{
		Pool:    pool,
		Zones:   []Zone{{Name: "lan.", Resolver: "192.168.1.1:53", Client: resolverAnswering(b, 0)}},
		Records: mustRRs(b, "nas.lan. 300 IN A 192.168.1.10"),
		Hooks:   HooksFunc(func(*Entry) {}),
	})
	if err != nil {
		b.Fatal(err)
	}
	raw := mustPack(b, withEDNS(newQuery("www.example.com.", dns.TypeA), 1232, false))
	buf := make([]byte, 0, 4096)
	ctx := context.Background()
	if out := serveInto(ctx, h, raw, ProtoUDP, buf); len(out) < len(raw) {
		b.Fatalf("ServeDNS answered %d bytes", len(out))
	}
	b.ReportAllocs()
	for b.Loop() {
		serveInto(ctx, h, raw, ProtoUDP, buf)
	}
}

// instantRawPool is instantPool on the byte path: it copies a packed
// answer into the query's buffer and validates it, as the UDP transport
// does with what it reads.
type instantRawPool struct {
	answer []byte // packed, wire ID wireID
}

const wireID = 0x5EED

func (p *instantRawPool) Exchange(_ context.Context, q *transport.Query, _ time.Time, trail []actors.Attempt) actors.Result {
	b := q.Buf[:copy(q.Buf[:cap(q.Buf)], p.answer)]
	l, ok := dnsmsg.LayoutAnswer(q.Packed, b, wireID)
	if !ok {
		panic("instantRawPool: the answer does not pass LayoutAnswer")
	}
	trail = append(trail, actors.Attempt{Upstream: "primary", Outcome: actors.OutcomeAnswer})
	return actors.Result{Answer: transport.Answer{Raw: b, Layout: l}, Upstream: "primary", Attempts: trail}
}

// BenchmarkServeWire is BenchmarkServePool on the byte path, with the
// answer buffer a UDP listener lends: raw query in, the upstream's bytes
// edited in place out.
func BenchmarkServeWire(b *testing.B) {
	q := withEDNS(newQuery("www.example.com.", dns.TypeA), 1232, false)
	a := new(dns.Msg)
	a.SetReply(q)
	a.Id = wireID
	a.RecursionAvailable = true
	a.Answer = mustRRs(b,
		"www.example.com. 300 IN A 93.184.215.14",
		"www.example.com. 300 IN A 93.184.215.15")
	a.SetEdns0(1232, false)
	a.Compress = true
	pool := &instantRawPool{answer: mustPack(b, a)}
	h, err := NewHandler(HandlerConfig{
		Pool:  pool,
		Hooks: HooksFunc(func(*Entry) {}),
	})
	if err != nil {
		b.Fatal(err)
	}
	raw := mustPack(b, q)
	buf := make([]byte, 0, 4096)
	ctx := context.Background()
	out := serveInto(ctx, h, raw, ProtoUDP, buf)
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil || m.Id != testID || len(m.Answer) != 2 || &out[0] != &buf[:1][0] {
		b.Fatalf("ServeDNS answered %v (%v), want two A records built in buf", m, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		serveInto(ctx, h, raw, ProtoUDP, buf)
	}
}

// BenchmarkServeLocal is the same round trip for a local record.
func BenchmarkServeLocal(b *testing.B) {
	h, err := NewHandler(HandlerConfig{
		Pool:    &fakePool{},
		Records: mustRRs(b, "nas.lan. 300 IN A 192.168.1.10"),
	})
	if err != nil {
		b.Fatal(err)
	}
	raw := mustPack(b, withEDNS(newQuery("nas.lan.", dns.TypeA), 1232, false))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		serve(ctx, h, raw, ProtoUDP)
	}
}

// memoryUpstream is an in-memory udp:// upstream on the byte path: it
// answers every query with a packed answer written into the query's
// buffer under the query's wire ID, and validates it with LayoutAnswer,
// which is what transport.UDP does with the datagram it reads.
type memoryUpstream struct {
	answer []byte
}

func (u *memoryUpstream) Exchange(_ context.Context, q *transport.Query, _ time.Time) (transport.Answer, error) {
	b := q.Buf[:copy(q.Buf[:cap(q.Buf)], u.answer)]
	b[0], b[1] = q.Packed[0], q.Packed[1]
	l, ok := dnsmsg.LayoutAnswer(q.Packed, b, uint16(b[0])<<8|uint16(b[1]))
	if !ok {
		panic("memoryUpstream: the answer does not pass LayoutAnswer")
	}
	return transport.Answer{Raw: b, Layout: l}, nil
}

// newForwardingPath builds BenchmarkServeThroughPool's handler: the real
// pool, two in-memory upstreams on the byte path, shipped timeouts.
func newForwardingPath(tb testing.TB, q *dns.Msg) *Handler {
	tb.Helper()
	a := new(dns.Msg)
	a.SetReply(q)
	a.RecursionAvailable = true
	a.Answer = mustRRs(tb,
		"www.example.com. 300 IN A 93.184.215.14",
		"www.example.com. 300 IN A 93.184.215.15")
	a.Compress = true
	up := &memoryUpstream{answer: mustPack(tb, a)}
	pool, err := actors.NewPool(actors.Policy{
		AttemptTimeout: 2500 * time.Millisecond,
		TotalTimeout:   5000 * time.Millisecond,
		Health:         actors.HealthPolicy{FailureThreshold: 3, Backoff: time.Second, BackoffMax: time.Minute},
	}, []actors.Spec{
		{Name: "primary", Slots: 1024, Transport: up},
		{Name: "secondary", Slots: 1024, Transport: up},
	}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	h, err := NewHandler(HandlerConfig{
		Pool:  pool,
		Hooks: HooksFunc(func(*Entry) {}),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// The steady-state forwarding path allocates at most one object per
// query: the question's name. (Issue 6 brought it to two; issue 12 removed
// the attempt's context, the other.)
func TestForwardingPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	q := newQuery("www.example.com.", dns.TypeA)
	h := newForwardingPath(t, q)
	raw := mustPack(t, q)
	buf := make([]byte, 0, 4096)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		if out := serveInto(ctx, h, raw, ProtoUDP, buf); len(out) < len(raw) {
			t.Fatalf("answer %x", out)
		}
	})
	if allocs > 1 {
		t.Errorf("a forwarded query allocates %v objects, want at most 1", allocs)
	}
}

// BenchmarkServeThroughPool is the whole steady-state forwarding path but
// for the sockets: raw client query in, through the real pool (two
// upstreams, shipped timeouts) to an in-memory upstream on the byte path,
// raw answer out in the listener's buffer; every core at once.
func BenchmarkServeThroughPool(b *testing.B) {
	q := newQuery("www.example.com.", dns.TypeA)
	h := newForwardingPath(b, q)
	raw := mustPack(b, q)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 4096)
		for pb.Next() {
			if out := serveInto(ctx, h, raw, ProtoUDP, buf); len(out) < len(raw) || out[3]&0xF != 0 {
				b.Fatalf("answer %x", out)
			}
		}
	})
}

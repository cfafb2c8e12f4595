package query

import (
	"context"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire"
)

// instantPool answers at once with a fresh message around shared, never
// modified records, as cheaply as a pool can hand over an answer: a
// message, its additional section and its OPT (3 allocations, counted in
// the benchmark's figures).
type instantPool struct {
	answer []dns.RR
}

func (p *instantPool) Exchange(_ context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
	m := &dns.Msg{
		MsgHdr:   dns.MsgHdr{Id: q.Id, Response: true, RecursionDesired: true, RecursionAvailable: true},
		Question: q.Question,
		Answer:   p.answer,
	}
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(1232)
	m.Extra = []dns.RR{opt}
	trail = append(trail, actors.Attempt{Upstream: 0, Outcome: actors.OutcomeAnswer})
	return actors.Result{Msg: m, Upstream: 0, Attempts: trail}
}

// BenchmarkServePool measures the query path around the pool: raw query in
// (A with EDNS), raw answer out (two A records), through an instant pool.
func BenchmarkServePool(b *testing.B) {
	pool := &instantPool{answer: mustRRs(b,
		"www.example.com. 300 IN A 93.184.215.14",
		"www.example.com. 300 IN A 93.184.215.15")}
	h, err := NewHandler(HandlerConfig{
		Pool:          pool,
		UpstreamNames: []string{"quad9"},
		Zones:         []Zone{{Name: "lan.", Resolver: "192.168.1.1:53", Client: resolverAnswering(b, 0)}},
		Records:       []Record{{Name: "nas.lan.", Type: dns.TypeA, Value: "192.168.1.10", TTL: 300}},
		Hooks:         HooksFunc(func(*Entry) {}),
	})
	if err != nil {
		b.Fatal(err)
	}
	raw := mustPack(b, withEDNS(newQuery("www.example.com.", dns.TypeA), 1232, false))
	ctx := context.Background()
	if out := h.Serve(ctx, raw, ProtoUDP, testClient); len(out) < len(raw) {
		b.Fatalf("Serve answered %d bytes", len(out))
	}
	b.ReportAllocs()
	for b.Loop() {
		h.Serve(ctx, raw, ProtoUDP, testClient)
	}
}

// instantWirePool is instantPool on the byte path: it copies a packed
// answer into the query's buffer and validates it, as the UDP transport
// does with what it reads.
type instantWirePool struct {
	instantPool
	answer []byte // packed, wire ID wireID
}

const wireID = 0x5EED

func (p *instantWirePool) ExchangeWire(_ context.Context, q *wire.WireQuery, trail []actors.Attempt) actors.Result {
	b := q.Buf[:copy(q.Buf[:cap(q.Buf)], p.answer)]
	l, ok := wire.LayoutAnswer(q.Packed, b, wireID)
	if !ok {
		panic("instantWirePool: the answer does not pass LayoutAnswer")
	}
	trail = append(trail, actors.Attempt{Upstream: 0, Outcome: actors.OutcomeAnswer})
	return actors.Result{Raw: b, Layout: l, Upstream: 0, Attempts: trail}
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
	pool := &instantWirePool{answer: mustPack(b, a)}
	h, err := NewHandler(HandlerConfig{
		Pool:          pool,
		UpstreamNames: []string{"quad9"},
		Hooks:         HooksFunc(func(*Entry) {}),
	})
	if err != nil {
		b.Fatal(err)
	}
	raw := mustPack(b, q)
	buf := make([]byte, 0, 4096)
	ctx := context.Background()
	out := h.ServeInto(ctx, raw, ProtoUDP, testClient, buf)
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil || m.Id != testID || len(m.Answer) != 2 || &out[0] != &buf[:1][0] {
		b.Fatalf("ServeInto answered %v (%v), want two A records built in buf", m, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		h.ServeInto(ctx, raw, ProtoUDP, testClient, buf)
	}
}

// BenchmarkServeLocal is the same round trip for a local record.
func BenchmarkServeLocal(b *testing.B) {
	h, err := NewHandler(HandlerConfig{
		Pool:    &fakePool{},
		Records: []Record{{Name: "nas.lan.", Type: dns.TypeA, Value: "192.168.1.10", TTL: 300}},
	})
	if err != nil {
		b.Fatal(err)
	}
	raw := mustPack(b, withEDNS(newQuery("nas.lan.", dns.TypeA), 1232, false))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h.Serve(ctx, raw, ProtoUDP, testClient)
	}
}

package query

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// The fuzz targets of the query path. Their seed corpora are the f.Add
// calls below (the seeds and fakes are in fuzz_fakes_test.go) and the files
// in testdata/fuzz/<FuzzName>/ (Go's corpus format; `go test -fuzz` also
// writes its findings there). .ci/run runs
// each for a few seconds; a longer run is
//
//	go test -run '^$' -fuzz '^FuzzServe$' -fuzztime 10m -parallel 1 ./query/

// FuzzServe feeds raw client bytes to ServeDNS over UDP and TCP, with every
// source of the resolution order configured (special names, local records,
// a forward zone, the pool) and answering from the query itself. ServeDNS must
// never panic; it drops exactly the inputs the specification drops (shorter
// than a header, or a response), and everything else gets an answer that
// parses, carries the query's ID, echoes its question unless it is a FORMERR,
// and over UDP fits the client's EDNS size.
func FuzzServe(f *testing.F) {
	for _, q := range fuzzServeSeeds(f) {
		f.Add(q, false)
		f.Add(q, true)
	}
	f.Add([]byte{}, false)
	f.Add([]byte{0xBE, 0xEF, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}, false) // a question announced, none there
	f.Add([]byte{0xBE, 0xEF, 0x81, 0x80, 0, 0, 0, 0, 0, 0, 0, 0}, false) // a response: dropped

	var answered atomic.Int64
	h := newFuzzHandler(f, HooksFunc(func(*Entry) { answered.Add(1) }))

	f.Fuzz(func(t *testing.T, raw []byte, tcp bool) {
		proto := ProtoUDP
		if tcp {
			proto = "tcp"
		}
		before := answered.Load()
		out := serve(context.Background(), h, raw, proto)

		dropped := len(raw) < dnsmsg.HeaderLen || raw[2]&0x80 != 0
		if out == nil {
			if !dropped {
				t.Fatalf("ServeDNS dropped a %d-byte query with a readable header and QR clear", len(raw))
			}
			if answered.Load() != before {
				t.Fatal("QueryDone called for a dropped query")
			}
			return
		}
		if dropped {
			t.Fatalf("ServeDNS answered input it must drop (%d bytes)", len(raw))
		}
		if got := answered.Load() - before; got != 1 {
			t.Fatalf("QueryDone called %d times for one answer", got)
		}
		checkFuzzAnswer(t, raw, proto, out, true)
	})
}

// checkFuzzAnswer fails t unless out is an acceptable answer to the client
// query raw (whatever it holds) received over proto. ownFORMERR says that
// a FORMERR can only be the query path's own (no fake upstream answers
// one), which carries no question.
func checkFuzzAnswer(t *testing.T, raw []byte, proto string, out []byte, ownFORMERR bool) {
	t.Helper()
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil {
		t.Fatalf("the answer does not parse: %v\n%x", err, out)
	}
	if id := binary.BigEndian.Uint16(raw); m.Id != id {
		t.Fatalf("answer ID %#x, want the query's %#x", m.Id, id)
	}
	if !m.Response {
		t.Fatal("answer has QR clear")
	}
	q := new(dns.Msg)
	qErr := q.Unpack(raw)
	if limit := fuzzClientLimit(proto, q, qErr); len(out) > limit {
		t.Fatalf("%s answer of %d bytes, over the client's %d", proto, len(out), limit)
	}
	if ownFORMERR && m.Rcode == dns.RcodeFormatError {
		// A question nxdnsd reads but refuses to ask (a meta-type) is
		// echoed; a query it cannot read gets none.
		meta := len(m.Question) == 1 && questionReject(m.Question[0].Qtype) == dns.RcodeFormatError
		if len(m.Question) != 0 && !meta {
			t.Fatalf("FORMERR with %d questions, want none", len(m.Question))
		}
		if meta && (qErr != nil || !sameQuestions(m.Question, q.Question)) {
			t.Fatalf("FORMERR for a meta-type with question %v, want the query's %v", m.Question, q.Question)
		}
		return
	}
	// Anything but the query path's FORMERR parsed, and keeps the client's
	// question as it was written.
	if qErr != nil {
		t.Fatalf("%s to a query that does not parse (%v)", dns.RcodeToString[m.Rcode], qErr)
	}
	if !sameQuestions(m.Question, q.Question) {
		t.Fatalf("answer question %v, want the query's %v", m.Question, q.Question)
	}
}

// fuzzClientLimit is an upper bound of the answer size nxdnsd may send the
// client of q: over UDP its EDNS size when q parsed with one OPT record (512
// at least, 1232 at most), otherwise 512; over a stream the largest message.
func fuzzClientLimit(proto string, q *dns.Msg, qErr error) int {
	if proto != ProtoUDP {
		return dns.MaxMsgSize
	}
	if qErr != nil {
		return dns.MinMsgSize
	}
	opt, n := findOPT(q.Extra)
	if n != 1 {
		return dns.MinMsgSize
	}
	return min(max(int(opt.UDPSize()), dns.MinMsgSize), dnsmsg.EDNSSize)
}

func sameQuestions(a, b []dns.Question) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzUpstreamAnswer hands whatever an upstream might send — garbage, the
// wrong question, an extended rcode, a stuffed OPT record, thousands of
// records — to the query path as the pool's answer, for a client query of
// fuzzed EDNS size, DO bit and protocol. The client must always get an
// answer that parses, with its own ID and question, that fits its UDP size
// — never the bytes of a malformed record miekg/dns parsed leniently. An
// upstream answer that can be sent on keeps its rcode and, unless truncated
// for UDP, its records.
func FuzzUpstreamAnswer(f *testing.F) {
	addUpstreamSeeds(f)

	f.Fuzz(func(t *testing.T, upstream []byte, size uint16, do, tcp bool) {
		from := new(dns.Msg)
		if err := from.Unpack(upstream); err != nil {
			// A transport reports that as transport.ErrMalformed, never hands
			// it on; FuzzServe covers the SERVFAIL the pool's error
			// becomes.
			return
		}
		// Whether it can be sent on at all, before the query path changes
		// it.
		repackErr := roundTrip(from)

		h, err := NewHandler(HandlerConfig{Pool: &fakePool{OnExchange: func(context.Context, *dns.Msg, []actors.Attempt) actors.Result {
			return actors.Result{Answer: transport.Answer{Msg: from}, Upstream: "primary"}
		}}})
		if err != nil {
			t.Fatal(err)
		}
		raw, proto := upstreamFuzzQuery(t, size, do, tcp)
		fromRcode, fromAnswers := from.Rcode, len(from.Answer)

		out := serve(context.Background(), h, raw, proto)
		if out == nil {
			t.Fatal("ServeDNS dropped a well-formed query")
		}
		checkFuzzAnswer(t, raw, proto, out, false)

		m := new(dns.Msg)
		if err := m.Unpack(out); err != nil {
			t.Fatal(err) // checkFuzzAnswer has said so already
		}
		if repackErr != nil {
			// It became a SERVFAIL, or lost what broke it to truncation
			// or to the OPT rules: checkFuzzAnswer has seen it parse.
			return
		}
		// The header's four rcode bits always survive; the extended bits
		// need an OPT record, which the last-resort truncation drops.
		if m.Rcode&0xF != fromRcode&0xF {
			t.Fatalf("rcode %d, want the upstream's %d", m.Rcode, fromRcode)
		}
		if !m.Truncated && len(m.Answer) != fromAnswers {
			t.Fatalf("untruncated answer with %d records, the upstream sent %d", len(m.Answer), fromAnswers)
		}
	})
}

// addUpstreamSeeds seeds a fuzz target over (upstream answer, client UDP
// size, DO, over TCP) with fuzzUpstreamSeeds and some garbage.
func addUpstreamSeeds(f *testing.F) {
	for _, m := range fuzzUpstreamSeeds(f) {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(0), false, false)
		f.Add(b, uint16(1232), true, false)
		f.Add(b, uint16(4096), false, true)
	}
	f.Add([]byte("not dns at all"), uint16(512), false, false)
}

// upstreamFuzzQuery is the client query of the upstream fuzz targets: an A
// query for www.example.org., with EDNS when size or do say so, over UDP or
// TCP.
func upstreamFuzzQuery(t *testing.T, size uint16, do, tcp bool) (raw []byte, proto string) {
	t.Helper()
	q := newQuery("www.example.org.", dns.TypeA)
	if size != 0 || do {
		q.SetEdns0(size, do)
	}
	raw, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	proto = ProtoUDP
	if tcp {
		proto = "tcp"
	}
	return raw, proto
}

// roundTrip reports why m, an upstream's answer as unpacked, cannot be
// sent on as it came, or nil: it must pack, and the packed bytes parse.
func roundTrip(m *dns.Msg) error {
	b, err := m.Copy().Pack()
	if err != nil {
		return err
	}
	if err := new(dns.Msg).Unpack(b); err != nil {
		return fmt.Errorf("packed, it no longer parses: %w", err)
	}
	return nil
}

// An upstream record that miekg/dns parses although its RDATA ends early
// (the missing fields stay zero) would go out as bytes no client can parse:
// such an answer becomes a SERVFAIL. A short RDATA that packs back the same
// passes. FuzzUpstreamAnswer found both malformed kinds
// (testdata/fuzz/FuzzUpstreamAnswer/soa-empty-rdata, nsec3-cut-salt).
func TestServeUpstreamShortRdata(t *testing.T) {
	t.Parallel()
	q := newQuery("www.example.org.", dns.TypeA)
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: "example.org.", Rrtype: t, Class: dns.ClassINET, Ttl: 60}
	}
	for _, tc := range []struct {
		name  string
		rr    dns.RR
		keep  int // bytes of RDATA the upstream sends
		rcode int
	}{
		{"SOA with RDLENGTH 0", &dns.SOA{Hdr: hdr(dns.TypeSOA), Ns: "ns.example.org.", Mbox: "h.example.org.", Serial: 1}, 0, dns.RcodeServerFailure},
		{"NSEC3 cut after the salt length", &dns.NSEC3{Hdr: hdr(dns.TypeNSEC3), Hash: 1, SaltLength: 4, Salt: "aabbccdd",
			HashLength: 20, NextDomain: "2t7b4g4vsa5smi47k61mv5bv1a22bojr", TypeBitMap: []uint16{dns.TypeA}}, 5, dns.RcodeServerFailure},
		{"A with RDLENGTH 0", &dns.A{Hdr: hdr(dns.TypeA), A: []byte{192, 0, 2, 1}}, 0, dns.RcodeSuccess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			from := new(dns.Msg).SetReply(q)
			from.Ns = []dns.RR{tc.rr}
			raw := mustPack(t, from)
			rdata := rdataOf(t, tc.rr)
			raw = raw[:len(raw)-len(rdata)+tc.keep] // the record is last
			binary.BigEndian.PutUint16(raw[len(raw)-tc.keep-2:], uint16(tc.keep))
			received := new(dns.Msg)
			if err := received.Unpack(raw); err != nil {
				t.Fatalf("the upstream's answer does not parse: %v", err)
			}

			h, _ := newTestHandler(t, HandlerConfig{Pool: &fakePool{OnExchange: func(context.Context, *dns.Msg, []actors.Attempt) actors.Result {
				return actors.Result{Answer: transport.Answer{Msg: received}, Upstream: "primary"}
			}}})
			m, _ := exchange(t, h, q, ProtoUDP) // fails unless the answer parses
			checkEcho(t, q, m)
			if m.Rcode != tc.rcode {
				t.Errorf("rcode %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
		})
	}
}

// rdataOf returns rr's RDATA as it packs.
func rdataOf(tb testing.TB, rr dns.RR) []byte {
	tb.Helper()
	buf := make([]byte, dns.Len(rr))
	end, err := dns.PackRR(rr, buf, 0, nil, false)
	if err != nil {
		tb.Fatal(err)
	}
	hdr := &dns.RFC3597{Hdr: *rr.Header()}
	hdrEnd, err := dns.PackRR(hdr, buf, 0, nil, false)
	if err != nil {
		tb.Fatal(err)
	}
	return buf[hdrEnd:end]
}

// FuzzParseCommon holds parse's fast path to the general one: whenever
// parseCommon takes a query, miekg/dns's parser accepts it too and the two
// requests are the same: the fields the query path reads, and the trimmed
// message, packed, byte for byte.
func FuzzParseCommon(f *testing.F) {
	for _, q := range fuzzServeSeeds(f) {
		f.Add(q, false)
	}
	for _, name := range []string{".", "example.com.", "ExAmple.COM.", "a-b_c.d0.", "*.example.", "a\\.b.example."} {
		q := newQuery(name, dns.TypeAAAA)
		f.Add(mustPack(f, q), true)
		f.Add(mustPack(f, withEDNS(q, 4096, true)), false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, tcp bool) {
		proto := ProtoUDP
		if tcp {
			proto = "tcp"
		}
		var common, general request
		if !common.header(raw, proto) || !common.parseCommon(raw, proto) {
			return
		}
		general.header(raw, proto)
		if rcode := general.parseGeneral(raw, proto); rcode != dns.RcodeSuccess {
			t.Fatalf("parseCommon took a query the general path answers %s", dns.RcodeToString[rcode])
		}
		if common.id != general.id || common.opcode != general.opcode || common.rd != general.rd ||
			common.cd != general.cd || common.lname != general.lname || common.edns != general.edns ||
			common.do != general.do || common.limit != general.limit ||
			len(common.question) != 1 || len(general.question) != 1 || common.question[0] != general.question[0] {
			t.Fatalf("requests differ:\ncommon  %+v\ngeneral %+v", common, general)
		}
		a, errA := common.msg.Pack()
		b, errB := general.msg.Pack()
		if errA != nil || errB != nil || string(a) != string(b) {
			t.Fatalf("trimmed messages differ:\ncommon  %v (%x, %v)\ngeneral %v (%x, %v)", &common.msg, a, errA, &general.msg, b, errB)
		}
		// packTrimmed copies the client's bytes instead of packing: they
		// must be what packing makes.
		var buf [512]byte
		if c, err := common.packTrimmed(buf[:]); err != nil || string(c) != string(b) {
			t.Fatalf("packTrimmed = %x, %v; packing makes %x", c, err, b)
		}
	})
}

// bytesPool is a Pool that answers with fixed upstream bytes as the UDP
// transport would hand them on: read into the query's buffer (cut at
// its capacity), with the query's wire ID; as bytes when LayoutAnswer
// vouches for them, else parsed as decodeReply parses them, else failed
// as a malformed answer is.
type bytesPool struct {
	upstream []byte
	raw      bool // the last answer went as bytes
}

func (p *bytesPool) Exchange(_ context.Context, q *transport.Query, _ time.Time, trail []actors.Attempt) actors.Result {
	b := q.Buf[:copy(q.Buf[:cap(q.Buf)], p.upstream)]
	if len(b) >= 2 {
		copy(b, q.Packed[:2])
	}
	id := binary.BigEndian.Uint16(q.Packed)
	if l, ok := dnsmsg.LayoutAnswer(q.Packed, b, id); ok && b[2]&0x02 == 0 {
		p.raw = true
		return actors.Result{Answer: transport.Answer{Raw: b, Layout: l}, Upstream: "primary", Attempts: trail}
	}
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil || !m.Response || m.Rcode == dns.RcodeRefused || len(m.Question) != 1 ||
		!strings.EqualFold(m.Question[0].Name, q.Msg.Question[0].Name) ||
		m.Question[0].Qtype != q.Msg.Question[0].Qtype || m.Question[0].Qclass != q.Msg.Question[0].Qclass {
		return actors.Result{Err: actors.ErrAllFailed, Upstream: "primary", Attempts: trail}
	}
	m.Id = q.Msg.Id
	return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary", Attempts: trail}
}

// FuzzUpstreamBytes is FuzzUpstreamAnswer on the byte path: whatever bytes
// an upstream sends, the client gets an answer that parses, with its own ID
// and question, that fits its UDP size; an answer forwarded as bytes keeps
// the upstream's rcode and, unless truncated, its records.
func FuzzUpstreamBytes(f *testing.F) {
	addUpstreamSeeds(f)

	f.Fuzz(func(t *testing.T, upstream []byte, size uint16, do, tcp bool) {
		pool := &bytesPool{upstream: upstream}
		h, err := NewHandler(HandlerConfig{Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		raw, proto := upstreamFuzzQuery(t, size, do, tcp)
		out := serveInto(context.Background(), h, raw, proto, make([]byte, 0, 4096))
		if out == nil {
			t.Fatal("ServeDNS dropped a well-formed query")
		}
		checkFuzzAnswer(t, raw, proto, out, false)
		if !pool.raw {
			return
		}
		from := new(dns.Msg)
		if err := from.Unpack(upstream); err != nil {
			t.Fatalf("LayoutAnswer vouched for bytes miekg/dns cannot parse: %v", err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(out); err != nil {
			t.Fatal(err) // checkFuzzAnswer has said so already
		}
		if m.Rcode&0xF != from.Rcode&0xF {
			t.Fatalf("rcode %d, want the upstream's %d", m.Rcode, from.Rcode)
		}
		if !m.Truncated && len(m.Answer) != len(from.Answer) {
			t.Fatalf("untruncated answer with %d records, the upstream sent %d", len(m.Answer), len(from.Answer))
		}
	})
}

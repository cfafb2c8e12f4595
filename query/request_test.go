package query

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// rawHeader is a DNS header in wire form.
func rawHeader(id, bits, qd, an, ns, ar uint16) []byte {
	b := make([]byte, dnsmsg.HeaderLen)
	for i, v := range []uint16{id, bits, qd, an, ns, ar} {
		binary.BigEndian.PutUint16(b[2*i:], v)
	}
	return b
}

func mustPack(tb testing.TB, m *dns.Msg) []byte {
	tb.Helper()
	b, err := m.Pack()
	if err != nil {
		tb.Fatalf("packing: %v", err)
	}
	return b
}

func TestServeRejects(t *testing.T) {
	t.Parallel()

	twoQuestions := withEDNS(newQuery("a.example.", dns.TypeA), 1232, true)
	twoQuestions.Question = append(twoQuestions.Question, dns.Question{Name: "b.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET})

	notify := newQuery("example.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify

	update := new(dns.Msg)
	update.SetUpdate("example.")
	update.Id = testID
	update.RecursionDesired = true

	version1 := withEDNS(newQuery("example.", dns.TypeA), 1232, true)
	version1.IsEdns0().SetVersion(1)

	twoOPT := withEDNS(newQuery("example.", dns.TypeA), 1232, false)
	twoOPT.Extra = append(twoOPT.Extra, dns.Copy(twoOPT.Extra[0]))

	response := newQuery("example.", dns.TypeA)
	response.Response = true

	// A compression pointer to itself: the header reads, the body does not.
	badName := []byte{0xC0, 0x0C, 0x00, 0x01, 0x00, 0x01}
	garbage := append(rawHeader(testID, dnsmsg.FlagRD, 1, 0, 0, 0), badName...)
	garbageUpdate := append(rawHeader(testID, dns.OpcodeUpdate<<11|dnsmsg.FlagRD, 1, 0, 0, 0), badName...)

	// A whole question, and an additional record announced but missing.
	lyingCount := mustPack(t, newQuery("example.", dns.TypeA))
	binary.BigEndian.PutUint16(lyingCount[10:], 1)

	tests := []struct {
		name       string
		raw        []byte
		drop       bool
		rcode      int
		opcode     int
		questions  int  // echoed in the answer
		opt        bool // the answer carries an OPT record
		headerOnly bool
	}{
		{name: "empty", raw: nil, drop: true},
		{name: "shorter than a header", raw: rawHeader(testID, dnsmsg.FlagRD, 1, 0, 0, 0)[:11], drop: true},
		{name: "a response", raw: mustPack(t, response), drop: true},
		{name: "garbage after a readable header", raw: garbage, rcode: dns.RcodeFormatError, headerOnly: true},
		{name: "garbage keeps the opcode", raw: garbageUpdate, rcode: dns.RcodeFormatError, opcode: dns.OpcodeUpdate, headerOnly: true},
		{name: "header announces a missing question", raw: rawHeader(testID, dnsmsg.FlagRD, 1, 0, 0, 0), rcode: dns.RcodeFormatError, headerOnly: true},
		{name: "header announces a missing record", raw: lyingCount, rcode: dns.RcodeFormatError, headerOnly: true},
		{name: "no question", raw: rawHeader(testID, dnsmsg.FlagRD, 0, 0, 0, 0), rcode: dns.RcodeFormatError},
		{name: "two questions", raw: mustPack(t, twoQuestions), rcode: dns.RcodeFormatError, opt: true},
		{name: "two OPT records", raw: mustPack(t, twoOPT), rcode: dns.RcodeFormatError},
		{name: "NOTIFY", raw: mustPack(t, notify), rcode: dns.RcodeNotImplemented, opcode: dns.OpcodeNotify, questions: 1},
		{name: "UPDATE", raw: mustPack(t, update), rcode: dns.RcodeNotImplemented, opcode: dns.OpcodeUpdate, questions: 1},
		{name: "EDNS version 1", raw: mustPack(t, version1), rcode: dns.RcodeBadVers, questions: 1, opt: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := &fakePool{}
			h, rec := newTestHandler(t, HandlerConfig{Pool: pool})
			out := serve(context.Background(), h, tt.raw, ProtoUDP)
			if pool.Calls() != 0 {
				t.Errorf("the pool was asked %d times, want 0", pool.Calls())
			}
			if tt.drop {
				if out != nil {
					t.Errorf("ServeDNS answered %d bytes, want a drop", len(out))
				}
				if n := rec.count(); n != 0 {
					t.Errorf("QueryDone called %d times for a drop, want 0", n)
				}
				return
			}
			if tt.headerOnly && len(out) != dnsmsg.HeaderLen {
				t.Errorf("answer is %d bytes, want a bare %d-byte header", len(out), dnsmsg.HeaderLen)
			}
			m := new(dns.Msg)
			if err := m.Unpack(out); err != nil {
				t.Fatalf("unpacking the answer: %v", err)
			}
			if m.Id != testID || !m.Response || !m.RecursionDesired {
				t.Errorf("answer header: id %#x qr %v rd %v, want id %#x, QR and RD set", m.Id, m.Response, m.RecursionDesired, testID)
			}
			if m.Rcode != tt.rcode {
				t.Errorf("rcode = %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tt.rcode])
			}
			if m.Opcode != tt.opcode {
				t.Errorf("opcode = %d, want %d", m.Opcode, tt.opcode)
			}
			if len(m.Question) != tt.questions {
				t.Errorf("answer echoes %d questions, want %d", len(m.Question), tt.questions)
			}
			if len(m.Answer)+len(m.Ns) != 0 {
				t.Errorf("answer has records: %v %v", m.Answer, m.Ns)
			}
			opt := m.IsEdns0()
			if (opt != nil) != tt.opt {
				t.Errorf("answer OPT = %v, want one: %v", opt, tt.opt)
			}
			if opt != nil && opt.Version() != 0 {
				t.Errorf("answer OPT version = %d, want 0", opt.Version())
			}

			e := rec.only(t)
			if e.Source != "" || e.Rcode != tt.rcode || e.Client != testClient || e.Proto != ProtoUDP {
				t.Errorf("entry = %+v, want no source, rcode %d, the client and proto", e, tt.rcode)
			}
		})
	}
}

func TestServeTrimsTheForwardedQuery(t *testing.T) {
	t.Parallel()
	q := withEDNS(newQuery("Example.COM.", dns.TypeA), 1400, true)
	q.CheckingDisabled = true
	q.AuthenticatedData = true
	q.Zero = true
	opt := q.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
	q.Ns = mustRRs(t, "example.com. 60 IN A 192.0.2.1")
	q.Extra = append(mustRRs(t, "junk.example. 60 IN TXT \"x\""), q.Extra...)

	pool := answeringPool(t, "example.com. 60 IN A 192.0.2.1")
	h, _ := newTestHandler(t, HandlerConfig{Pool: pool})
	exchange(t, h, q, ProtoUDP)

	if pool.Last() == nil {
		t.Fatal("the pool was not asked")
	}
	// The message and the bytes the transports send are the same trimmed
	// query.
	packed := new(dns.Msg)
	if err := packed.Unpack(pool.LastPacked()); err != nil {
		t.Fatalf("the packed query does not parse: %v", err)
	}
	for _, f := range []struct {
		form string
		up   *dns.Msg
	}{{"Msg", pool.Last()}, {"Packed", packed}} {
		up := f.up
		if up.Question[0] != q.Question[0] {
			t.Errorf("%s: forwarded question = %v, want the client's %v", f.form, up.Question[0], q.Question[0])
		}
		if !up.RecursionDesired || !up.CheckingDisabled || !up.AuthenticatedData || up.Zero || up.Response {
			t.Errorf("%s: forwarded header = %+v, want RD, CD and AD kept and nothing else", f.form, up.MsgHdr)
		}
		if len(up.Answer)+len(up.Ns) != 0 || len(up.Extra) != 1 {
			t.Fatalf("%s: forwarded sections: %d answers, %d authority, %d additional; want only the OPT", f.form, len(up.Answer), len(up.Ns), len(up.Extra))
		}
		upOPT, ok := up.Extra[0].(*dns.OPT)
		if !ok || !upOPT.Do() || upOPT.UDPSize() != dnsmsg.EDNSSize || len(upOPT.Option) != 1 || upOPT.Option[0].Option() != dns.EDNS0NSID {
			t.Errorf("%s: forwarded OPT = %v, want the client's (DO, NSID) with nxdnsd's size, 1232", f.form, up.Extra[0])
		}
	}
}

func TestServeForwardsNoEDNSWithoutEDNS(t *testing.T) {
	t.Parallel()
	pool := answeringPool(t)
	h, _ := newTestHandler(t, HandlerConfig{Pool: pool})
	exchange(t, h, newQuery("example.com.", dns.TypeA), ProtoUDP)
	if up := pool.Last(); up == nil || len(up.Extra) != 0 {
		t.Errorf("forwarded query = %v, want no additional records", up)
	}
	if packed := pool.LastPacked(); len(packed) < dnsmsg.HeaderLen || binary.BigEndian.Uint16(packed[10:]) != 0 {
		t.Errorf("forwarded bytes %x, want no additional records", packed)
	}
}

func TestAnswerLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		proto string
		edns  bool
		size  uint16
		want  int
	}{
		{ProtoUDP, false, 0, 512},
		{ProtoUDP, true, 100, 512},
		{ProtoUDP, true, 512, 512},
		{ProtoUDP, true, 1232, 1232},
		{ProtoUDP, true, 1000, 1000},
		{ProtoUDP, true, 1233, 1232},
		{ProtoUDP, true, 4096, 1232},
		{ProtoUDP, true, 65535, 1232},
		{"tcp", false, 0, 65535},
		{"tcp", true, 1232, 65535},
	}
	for _, tt := range tests {
		if got := answerLimit(tt.proto, tt.edns, tt.size); got != tt.want {
			t.Errorf("answerLimit(%q, %v, %d) = %d, want %d", tt.proto, tt.edns, tt.size, got, tt.want)
		}
	}
}

package dnsmsg

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// layoutQueryName is the name the typical answer answers.
const layoutQueryName = "www.example.com."

// layoutPair packs a query for name and qtype with EDNS (DO set), as
// nxdnsd forwards it, and an answer to it with wire ID wiretest.ReplyWireID: RA set,
// an OPT record, compressed, edited by edit before it is packed.
func layoutPair(tb testing.TB, name string, qtype uint16, edit func(r *dns.Msg)) (q, raw []byte) {
	tb.Helper()
	query := new(dns.Msg).SetQuestion(name, qtype)
	query.Id = 0xBEEF
	query.SetEdns0(1232, true)
	r := new(dns.Msg).SetReply(query)
	r.Id = wiretest.ReplyWireID
	r.RecursionAvailable = true
	r.Compress = true
	r.SetEdns0(1232, true)
	edit(r)
	return pack(tb, query), pack(tb, r)
}

// typicalAnswer gives r the answer section most answers have: a CNAME and
// two A records of its target. Packed by layoutPair, with an OPT record
// and names compressed, the answer's question ends at 33, its CNAME's owner is a pointer at 33 to the question's name,
// its CNAME's target at 45 is "web" and a pointer to 16 ("example.com"),
// the first A record's owner is a pointer at 51 to 45, and the OPT record
// is the last 11 bytes.
func typicalAnswer(tb testing.TB, r *dns.Msg) {
	tb.Helper()
	r.Answer = mustRRs(tb,
		"www.example.com. 300 IN CNAME web.example.com.",
		"web.example.com. 60 IN A 192.0.2.1",
		"web.example.com. 60 IN A 192.0.2.2")
}

// mustRRs parses records in zone-file format.
func mustRRs(tb testing.TB, zone ...string) []dns.RR {
	tb.Helper()
	rrs := make([]dns.RR, len(zone))
	for i, s := range zone {
		rr, err := dns.NewRR(s)
		if err != nil {
			tb.Fatalf("parsing %q: %v", s, err)
		}
		rrs[i] = rr
	}
	return rrs
}

// rawRR returns a record of type typ (class IN) owned by name whose RDATA
// is the bytes hexRdata spells, whatever that type's RDATA must be: miekg/dns
// packs an RFC 3597 record's RDATA as it is.
func rawRR(tb testing.TB, name string, typ uint16, hexRdata string) dns.RR {
	tb.Helper()
	if _, err := hex.DecodeString(hexRdata); err != nil {
		tb.Fatalf("RDATA %q: %v", hexRdata, err)
	}
	return &dns.RFC3597{Hdr: dns.RR_Header{Name: name, Rrtype: typ, Class: dns.ClassINET, Ttl: 60}, Rdata: hexRdata}
}

// patch returns a copy of raw with the byte at off set to now, failing tb
// unless it was was: the cases that edit bytes check where they are.
func patch(tb testing.TB, raw []byte, off int, was, now byte) []byte {
	tb.Helper()
	if raw[off] != was {
		tb.Fatalf("byte %d is %#x, want %#x: the answer's layout changed", off, raw[off], was)
	}
	out := bytes.Clone(raw)
	out[off] = now
	return out
}

// optRdata returns a copy of raw, whose last record is an OPT record
// without options, with rdata as that record's RDATA. miekg/dns cannot
// pack such an OPT record itself: its RFC 3597 records may not be OPTs.
func optRdata(raw []byte, rdata ...byte) []byte {
	out := bytes.Clone(raw)
	binary.BigEndian.PutUint16(out[len(out)-2:], uint16(len(rdata)))
	return append(out, rdata...)
}

// pointerChain returns RDATA for a TXT record whose one string, starting at
// offset at of the message, holds n compression pointers: the first points
// at the question's name, each other one at the one before it. It also
// returns the offset of the last pointer.
func pointerChain(at, n int) (rdata string, last int) {
	b := []byte{byte(2 * n)}
	target := HeaderLen
	for i := range n {
		b = binary.BigEndian.AppendUint16(b, 0xC000|uint16(target))
		target = at + 2*i
	}
	return hex.EncodeToString(b), target
}

// layoutCase is one answer to LayoutAnswer and whether it may be forwarded
// as it is.
type layoutCase struct {
	name   string
	q, raw []byte
	want   bool
}

// layoutCases are the typical answer, answers of every type LayoutAnswer
// knows, and each of its rules broken one at a time.
func layoutCases(tb testing.TB) []layoutCase {
	tb.Helper()
	q, typical := layoutPair(tb, layoutQueryName, dns.TypeA, func(r *dns.Msg) { typicalAnswer(tb, r) })
	// answer is the typical answer edited.
	answer := func(edit func(r *dns.Msg)) []byte {
		tb.Helper()
		_, raw := layoutPair(tb, layoutQueryName, dns.TypeA, func(r *dns.Msg) {
			typicalAnswer(tb, r)
			edit(r)
		})
		return raw
	}
	var cases []layoutCase
	add := func(name string, q, raw []byte, want bool) {
		cases = append(cases, layoutCase{name, q, raw, want})
	}
	edited := func(name string, want bool, edit func(r *dns.Msg)) { add(name, q, answer(edit), want) }
	rr := func(zone string) dns.RR { tb.Helper(); return mustRRs(tb, zone)[0] }
	opt := func(options ...dns.EDNS0) *dns.OPT {
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}, Option: options}
		o.SetUDPSize(1232)
		return o
	}

	// Answers that may be forwarded.
	add("typical", q, typical, true)
	add("same name, other case", q, answer(func(r *dns.Msg) { r.Question[0].Name = "WwW.ExAmPlE.CoM." }), true)
	edited("no OPT", true, func(r *dns.Msg) { r.Extra = nil })
	edited("TC set, no records", true, func(r *dns.Msg) { r.Truncated = true; r.Answer = nil })
	edited("SERVFAIL", true, func(r *dns.Msg) { r.Rcode = dns.RcodeServerFailure; r.Answer = nil })
	edited("extended rcode BADCOOKIE", true, func(r *dns.Msg) { r.Rcode = dns.RcodeBadCookie; r.Answer = nil })
	edited("OPT with cookie, EDE, NSID, padding, keepalive", true, func(r *dns.Msg) {
		r.Extra = []dns.RR{opt(
			&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708a1a2a3a4a5a6a7a8"},
			&dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeStaleAnswer, ExtraText: "stale"},
			&dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: "6e7331"},
			&dns.EDNS0_PADDING{Padding: make([]byte, 20)},
			&dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE, Timeout: 100},
		)}
	})
	edited("OPT before another additional record", true, func(r *dns.Msg) {
		r.Extra = append(r.Extra, rr("ns1.example.com. 60 IN A 192.0.2.53"))
	})
	others := []struct {
		name  string
		qname string
		qtype uint16
		zone  []string
	}{
		{"MX", "example.org.", dns.TypeMX, []string{
			"example.org. 60 IN MX 10 mx1.example.org.", "example.org. 60 IN MX 20 mx2.example.net.",
			"mx1.example.org. 60 IN A 192.0.2.25"}},
		{"TXT", "example.org.", dns.TypeTXT, []string{
			`example.org. 60 IN TXT "v=spf1 -all"`, `example.org. 60 IN TXT "a" "" "quote\" backslash\\ \000\255"`}},
		{"SRV", "_sip._tcp.example.org.", dns.TypeSRV, []string{
			"_sip._tcp.example.org. 60 IN SRV 10 60 5060 sip.example.org."}},
		{"NS", "example.org.", dns.TypeNS, []string{
			"example.org. 60 IN NS ns1.example.org.", "example.org. 60 IN NS ns2.example.org."}},
		{"PTR", "1.2.0.192.in-addr.arpa.", dns.TypePTR, []string{
			"1.2.0.192.in-addr.arpa. 60 IN PTR host.example.org."}},
		{"DNAME", "x.old.example.", dns.TypeA, []string{
			"old.example. 60 IN DNAME new.example.", "x.old.example. 60 IN CNAME x.new.example.",
			"x.new.example. 60 IN A 192.0.2.7"}},
		{"AAAA", "v6.example.net.", dns.TypeAAAA, []string{
			"v6.example.net. 60 IN AAAA 2001:db8::1", "v6.example.net. 60 IN AAAA 2001:db8::2"}},
		{"SOA", "example.org.", dns.TypeSOA, []string{
			"example.org. 3600 IN SOA ns1.example.org. hostmaster.example.org. 2024010101 7200 3600 1209600 300"}},
	}
	for _, o := range others {
		oq, oraw := layoutPair(tb, o.qname, o.qtype, func(r *dns.Msg) { r.Answer = mustRRs(tb, o.zone...) })
		add(o.name, oq, oraw, true)
	}
	nxq, nxdomain := layoutPair(tb, "nx.example.org.", dns.TypeA, func(r *dns.Msg) {
		r.Rcode = dns.RcodeNameError
		r.Ns = mustRRs(tb, "example.org. 300 IN SOA ns1.example.org. hostmaster.example.org. 1 7200 3600 1209600 300")
	})
	add("NXDOMAIN with SOA", nxq, nxdomain, true)

	// Names at their limits: 255 bytes expanded passes, 256 does not.
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "."
	q255, a255 := layoutPair(tb, long+strings.Repeat("d", 61)+".", dns.TypeA, func(r *dns.Msg) {
		r.Answer = []dns.RR{rr(long + strings.Repeat("d", 61) + ". 60 IN A 192.0.2.1")}
	})
	add("name of 255 bytes", q255, a255, true)
	q253, cname255 := layoutPair(tb, long+strings.Repeat("d", 59)+".", dns.TypeA, func(r *dns.Msg) {
		r.Answer = []dns.RR{rawRR(tb, long+strings.Repeat("d", 59)+".", dns.TypeCNAME, "0178c00c")} // x + the 253-byte name
	})
	add("CNAME target of 255 bytes expanded", q253, cname255, true)
	q254, cname256 := layoutPair(tb, long+strings.Repeat("d", 60)+".", dns.TypeA, func(r *dns.Msg) {
		r.Answer = []dns.RR{rawRR(tb, long+strings.Repeat("d", 60)+".", dns.TypeCNAME, "0178c00c")} // x + the 254-byte name
	})
	add("CNAME target of 256 bytes expanded", q254, cname256, false)
	_, cname256 = layoutPair(tb, long+strings.Repeat("d", 60)+".", dns.TypeA, func(r *dns.Msg) {
		r.Answer = []dns.RR{rawRR(tb, long+strings.Repeat("d", 60)+".", dns.TypeCNAME,
			"0178"+hex.EncodeToString(q254[HeaderLen:HeaderLen+254]))} // x + the 254-byte name, written out
	})
	add("CNAME target of 256 bytes written out", q254, cname256, false)

	// The pointer budget: 126 hops pass, 127 do not. The TXT record's
	// RDATA starts at 45, its string at 46.
	for _, c := range []struct {
		chain int
		want  bool
	}{{125, true}, {126, false}} {
		chain, last := pointerChain(46, c.chain)
		edited(fmt.Sprintf("CNAME target %d hops away", 1+c.chain), c.want, func(r *dns.Msg) {
			r.Answer = []dns.RR{
				rawRR(tb, layoutQueryName, dns.TypeTXT, chain),
				rawRR(tb, layoutQueryName, dns.TypeCNAME, hex.EncodeToString([]byte{0xC0 | byte(last>>8), byte(last)})),
			}
		})
	}

	// The header.
	add("wrong ID", q, patch(tb, typical, 1, 0x34, 0x35), false)
	edited("QR clear", false, func(r *dns.Msg) { r.Response = false })
	edited("REFUSED", false, func(r *dns.Msg) { r.Rcode = dns.RcodeRefused })
	edited("opcode NOTIFY", false, func(r *dns.Msg) { r.Opcode = dns.OpcodeNotify })
	add("shorter than a header", q, typical[:HeaderLen-1], false)
	add("header only", q, typical[:HeaderLen], false)
	add("empty", q, nil, false)

	// The question.
	edited("QDCOUNT 2", false, func(r *dns.Msg) { r.Question = append(r.Question, r.Question[0]) })
	edited("QDCOUNT 0", false, func(r *dns.Msg) { r.Question = nil })
	edited("other name", false, func(r *dns.Msg) { r.Question[0].Name = "www.example.org." })
	edited("other type", false, func(r *dns.Msg) { r.Question[0].Qtype = dns.TypeAAAA })
	edited("other class", false, func(r *dns.Msg) { r.Question[0].Qclass = dns.ClassCHAOS })
	add("cut in the question", q, typical[:20], false)
	// www and a pointer to "example.com" in the answer's owner name:
	// miekg/dns follows it, LayoutAnswer wants the question written out.
	compressed := []byte{0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0,
		3, 'w', 'w', 'w', 0xC0, 26, 0, 1, 0, 1,
		3, 'w', 'w', 'w', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0,
		0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1}
	add("compressed question name", q, compressed, false)
	add("query with two questions", pack(tb, &dns.Msg{Question: []dns.Question{
		{Name: layoutQueryName, Qtype: dns.TypeA, Qclass: dns.ClassINET},
		{Name: layoutQueryName, Qtype: dns.TypeA, Qclass: dns.ClassINET}}}), typical, false)
	add("query cut short", q[:20], typical, false)

	// The counts.
	add("trailing byte", q, append(bytes.Clone(typical), 0), false)
	add("ARCOUNT overstated", q, patch(tb, typical, 11, 1, 2), false)
	add("ANCOUNT understated", q, patch(tb, typical, 7, 3, 2), false)
	add("truncated RDATA", q, typical[:len(typical)-11-2], false)
	add("cut in a record header", q, typical[:len(typical)-11-8], false)

	// Names.
	add("forward pointer", q, patch(tb, typical, 34, 12, 45), false)
	add("pointer loop", q, patch(tb, typical, 52, 45, 51), false)
	add("pointer into the header", q, patch(tb, typical, 52, 45, 4), false)
	add("label type 0x40", q, patch(tb, typical, 45, 3, 0x43), false)
	add("label type 0x80", q, patch(tb, typical, 45, 3, 0x83), false)

	// RDATA.
	edited("A with RDLENGTH 5", false, func(r *dns.Msg) { r.Answer[1] = rawRR(tb, "web.example.com.", dns.TypeA, "c00002010a") })
	edited("A with RDLENGTH 0", false, func(r *dns.Msg) { r.Answer[1] = rawRR(tb, "web.example.com.", dns.TypeA, "") })
	edited("AAAA with RDLENGTH 4", false, func(r *dns.Msg) { r.Answer[1] = rawRR(tb, "web.example.com.", dns.TypeAAAA, "c0000201") })
	edited("CNAME with a trailing byte", false, func(r *dns.Msg) {
		r.Answer[0] = rawRR(tb, layoutQueryName, dns.TypeCNAME, "03776562076578616d706c6503636f6d0000")
	})
	edited("MX without its exchange", false, func(r *dns.Msg) { r.Answer[0] = rawRR(tb, layoutQueryName, dns.TypeMX, "000a") })
	edited("SOA without its minimum", false, func(r *dns.Msg) {
		r.Ns = []dns.RR{rawRR(tb, layoutQueryName, dns.TypeSOA, "00"+"00"+strings.Repeat("00000001", 4))}
	})
	edited("SOA with a byte more", false, func(r *dns.Msg) {
		r.Ns = []dns.RR{rawRR(tb, layoutQueryName, dns.TypeSOA, "00"+"00"+strings.Repeat("00000001", 5)+"00")}
	})
	edited("SRV without its target", false, func(r *dns.Msg) { r.Answer[0] = rawRR(tb, layoutQueryName, dns.TypeSRV, "000a003c13c4") })
	edited("TXT with RDLENGTH 0", false, func(r *dns.Msg) { r.Answer[0] = rawRR(tb, layoutQueryName, dns.TypeTXT, "") })
	edited("TXT string past RDATA", false, func(r *dns.Msg) { r.Answer[0] = rawRR(tb, layoutQueryName, dns.TypeTXT, "05616263") })
	edited("record of class CH", false, func(r *dns.Msg) { r.Answer[1].Header().Class = dns.ClassCHAOS })
	edited("unknown type 65280", false, func(r *dns.Msg) { r.Answer[1] = rawRR(tb, "web.example.com.", 65280, "c0000201") })
	edited("RRSIG", false, func(r *dns.Msg) {
		r.Answer = append(r.Answer, rr("web.example.com. 60 IN RRSIG A 13 3 60 20300101000000 20200101000000 12345 example.com. c2lnbmF0dXJl"))
	})
	edited("HTTPS", false, func(r *dns.Msg) { r.Answer = append(r.Answer, rr(`web.example.com. 60 IN HTTPS 1 . alpn="h2"`)) })

	// The OPT record.
	edited("two OPTs", false, func(r *dns.Msg) { r.Extra = append(r.Extra, opt()) })
	edited("OPT in the answer section", false, func(r *dns.Msg) { r.Answer = append(r.Answer, opt()) })
	edited("OPT in the authority section", false, func(r *dns.Msg) { r.Ns = []dns.RR{opt()}; r.Extra = nil })
	edited("OPT version 1", false, func(r *dns.Msg) { r.IsEdns0().SetVersion(1) })
	edited("OPT not owned by the root", false, func(r *dns.Msg) { r.IsEdns0().Hdr.Name = "example.com." })
	add("OPT option past RDATA", q, optRdata(typical, 0x00, 0x0a, 0x00, 0x10, 0xa1, 0xa2), false)
	add("OPT half an option header", q, optRdata(typical, 0x00, 0x0a, 0x00), false)
	edited("OPT with client subnet", false, func(r *dns.Msg) {
		r.Extra = []dns.RR{opt(&dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: []byte{192, 0, 2, 0}})}
	})
	edited("OPT with a local option", false, func(r *dns.Msg) {
		r.Extra = []dns.RR{opt(&dns.EDNS0_LOCAL{Code: dns.EDNS0LOCALSTART, Data: []byte{1}})}
	})
	edited("OPT with EDE shorter than its code", false, func(r *dns.Msg) {
		r.Extra = []dns.RR{opt(&dns.EDNS0_LOCAL{Code: dns.EDNS0EDE, Data: []byte{1}})}
	})
	edited("OPT with keepalive of 3 bytes", false, func(r *dns.Msg) {
		r.Extra = []dns.RR{opt(&dns.EDNS0_LOCAL{Code: dns.EDNS0TCPKEEPALIVE, Data: []byte{1, 2, 3}})}
	})
	return cases
}

// TestLayoutAnswer runs LayoutAnswer on layoutCases; every answer it passes
// must pass checkLayout too.
func TestLayoutAnswer(t *testing.T) {
	t.Parallel()
	for _, c := range layoutCases(t) {
		l, ok := LayoutAnswer(c.q, c.raw, wiretest.ReplyWireID)
		if ok != c.want {
			t.Errorf("%s: LayoutAnswer = %v, want %v", c.name, ok, c.want)
			continue
		}
		if ok {
			checkLayout(t, c.q, c.raw, l)
		}
	}
}

// TestLayoutAnswerByteChanges changes each byte of each answer of
// layoutCases that LayoutAnswer passes, one at a time, to a value next to
// it or to one that means something in a header, a name or an RDLENGTH
// (types LayoutAnswer knows included): whatever of those it passes must
// pass checkLayout. Unlike FuzzAnswerLayout's random walk, it tries every
// such neighbour of every seed.
func TestLayoutAnswerByteChanges(t *testing.T) {
	t.Parallel()
	values := []byte{0, 1, 2, 3, 4, 5, 6, 12, 15, 16, 20, 28, 33, 39, 41, 63, 64, 127, 128, 191, 192, 255}
	for _, c := range layoutCases(t) {
		if !c.want {
			continue
		}
		raw := bytes.Clone(c.raw)
		for i, was := range c.raw {
			for _, v := range append(values, was-1, was+1) {
				if raw[i] = v; v == was {
					continue
				}
				if l, ok := LayoutAnswer(c.q, raw, wiretest.ReplyWireID); ok {
					checkLayout(t, c.q, raw, l)
				}
			}
			raw[i] = was
		}
	}
}

// TestLayoutAnswerOffsets checks the layout of the typical answer, and of
// one without an OPT record.
func TestLayoutAnswerOffsets(t *testing.T) {
	t.Parallel()
	q, raw := layoutPair(t, layoutQueryName, dns.TypeA, func(r *dns.Msg) { typicalAnswer(t, r) })
	want := AnswerLayout{QuestionEnd: 33, OPT: len(raw) - 11, OPTEnd: len(raw), Rcode: dns.RcodeSuccess}
	if l, ok := LayoutAnswer(q, raw, wiretest.ReplyWireID); !ok || l != want {
		t.Errorf("typical answer: LayoutAnswer = %+v, %v; want %+v, true", l, ok, want)
	}

	_, raw = layoutPair(t, layoutQueryName, dns.TypeA, func(r *dns.Msg) {
		typicalAnswer(t, r)
		r.Rcode = dns.RcodeNameError
		r.Extra = nil
	})
	want = AnswerLayout{QuestionEnd: 33, OPT: -1, OPTEnd: -1, Rcode: dns.RcodeNameError}
	if l, ok := LayoutAnswer(q, raw, wiretest.ReplyWireID); !ok || l != want {
		t.Errorf("without OPT: LayoutAnswer = %+v, %v; want %+v, true", l, ok, want)
	}
}

// TestLayoutAnswerAllocatesNothing holds LayoutAnswer to zero allocations
// on the typical answer: it runs once per forwarded answer.
func TestLayoutAnswerAllocatesNothing(t *testing.T) {
	q, raw := layoutPair(t, layoutQueryName, dns.TypeA, func(r *dns.Msg) { typicalAnswer(t, r) })
	if n := testing.AllocsPerRun(100, func() { LayoutAnswer(q, raw, wiretest.ReplyWireID) }); n != 0 {
		t.Errorf("LayoutAnswer allocates %v times per call, want 0", n)
	}
}

// checkLayout asserts what LayoutAnswer promises of raw, an answer to q it
// passed with layout l, using miekg/dns as the judge: raw unpacks, as a
// response with ID wiretest.ReplyWireID to q's question, not REFUSED, with l's
// rcode and every record its counts announce; packed again and unpacked,
// it is the same message (miekg/dns parsed nothing leniently); and l's
// offsets are those of the question and of the one OPT record.
func checkLayout(tb testing.TB, q, raw []byte, l AnswerLayout) {
	tb.Helper()
	m := new(dns.Msg)
	if err := m.Unpack(raw); err != nil {
		tb.Fatalf("passed %x, which does not unpack: %v", raw, err)
	}
	if m.Id != wiretest.ReplyWireID || !m.Response || m.Opcode != dns.OpcodeQuery || m.Rcode == dns.RcodeRefused {
		tb.Fatalf("passed %x: ID %#x, QR %v, opcode %d, rcode %d", raw, m.Id, m.Response, m.Opcode, m.Rcode)
	}
	if m.Rcode != l.Rcode {
		tb.Fatalf("passed %x: rcode %d, miekg/dns says %d", raw, l.Rcode, m.Rcode)
	}

	qname, qend, err := dns.UnpackDomainName(q, HeaderLen)
	if err != nil || qend+4 != l.QuestionEnd {
		tb.Fatalf("passed %x for query %x: its question ends at %d, err %v; QuestionEnd %d", raw, q, qend+4, err, l.QuestionEnd)
	}
	if name, end, err := dns.UnpackDomainName(raw, HeaderLen); err != nil || end != qend || !strings.EqualFold(name, qname) ||
		!bytes.Equal(raw[qend:qend+4], q[qend:qend+4]) {
		tb.Fatalf("passed %x for query %x: question %q ending at %d (%v), want %q ending at %d",
			raw, q, name, end, err, qname, qend)
	}
	if len(m.Question) != 1 || !strings.EqualFold(m.Question[0].Name, qname) {
		tb.Fatalf("passed %x: question %v, want %q", raw, m.Question, qname)
	}

	count := func(m *dns.Msg) int { return len(m.Answer) + len(m.Ns) + len(m.Extra) }
	announced := int(binary.BigEndian.Uint16(raw[6:])) + int(binary.BigEndian.Uint16(raw[8:])) + int(binary.BigEndian.Uint16(raw[10:]))
	if count(m) != announced {
		tb.Fatalf("passed %x: miekg/dns unpacks %d records, the counts announce %d", raw, count(m), announced)
	}
	repacked, err := m.Pack()
	if err != nil {
		tb.Fatalf("passed %x, which does not pack again: %v", raw, err)
	}
	again := new(dns.Msg)
	if err := again.Unpack(repacked); err != nil {
		tb.Fatalf("passed %x, which packed again as %x does not unpack: %v", raw, repacked, err)
	}
	if count(again) != announced || again.String() != m.String() {
		tb.Fatalf("passed %x, which packed again as %x unpacks as\n%v\nnot\n%v", raw, repacked, again, m)
	}

	opts := 0
	for _, rr := range m.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			opts++
		}
	}
	opt := m.IsEdns0()
	switch {
	case l.OPT < 0:
		if opts != 0 || l.OPTEnd != -1 {
			tb.Fatalf("passed %x: no OPT record (end %d), miekg/dns sees %d", raw, l.OPTEnd, opts)
		}
	case opts != 1 || l.OPT+11 > l.OPTEnd || l.OPTEnd > len(raw) || raw[l.OPT] != 0 ||
		binary.BigEndian.Uint16(raw[l.OPT+1:]) != dns.TypeOPT ||
		int(opt.Hdr.Rdlength) != l.OPTEnd-l.OPT-11 || opt.Version() != 0:
		tb.Fatalf("passed %x: OPT record at %d to %d, miekg/dns sees %d: %v", raw, l.OPT, l.OPTEnd, opts, opt)
	}
}

// FuzzAnswerLayout checks LayoutAnswer against miekg/dns: whatever the
// query and answer bytes, it must not panic, and every answer it passes
// must pass checkLayout. Its seeds are layoutCases and FuzzDecodeReply's.
// A longer run is
//
//	go test -run '^$' -fuzz '^FuzzAnswerLayout$' -fuzztime 10m -parallel 1 ./wire/dnsmsg/
func FuzzAnswerLayout(f *testing.F) {
	for _, c := range layoutCases(f) {
		f.Add(c.q, c.raw)
	}
	q := pack(f, wiretest.ReplyQuery())
	for _, raw := range wiretest.ReplySeeds(f) {
		f.Add(q, raw)
	}
	f.Fuzz(func(t *testing.T, q, raw []byte) {
		if l, ok := LayoutAnswer(q, raw, wiretest.ReplyWireID); ok {
			checkLayout(t, q, raw, l)
		}
	})
}

// BenchmarkLayoutAnswer measures LayoutAnswer on the typical answer, next
// to BenchmarkLayoutAnswerUnpack.
func BenchmarkLayoutAnswer(b *testing.B) {
	q, raw := layoutPair(b, layoutQueryName, dns.TypeA, func(r *dns.Msg) { typicalAnswer(b, r) })
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := LayoutAnswer(q, raw, wiretest.ReplyWireID); !ok {
			b.Fatal("LayoutAnswer refused the typical answer")
		}
	}
}

// BenchmarkLayoutAnswerUnpack measures what decodeReply does with the
// typical answer instead: unpack it.
func BenchmarkLayoutAnswerUnpack(b *testing.B) {
	_, raw := layoutPair(b, layoutQueryName, dns.TypeA, func(r *dns.Msg) { typicalAnswer(b, r) })
	b.ReportAllocs()
	for b.Loop() {
		if err := new(dns.Msg).Unpack(raw); err != nil {
			b.Fatal(err)
		}
	}
}

package query

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// The fakes and seeds of the fuzz targets in fuzz_test.go.

// newFuzzHandler is FuzzServe's handler: every source of the resolution
// order configured, the zone and the pool answering with answerFromQuery.
func newFuzzHandler(tb testing.TB, hooks Hooks) *Handler {
	tb.Helper()
	h, err := NewHandler(HandlerConfig{
		Records: fuzzRecords(tb),
		Zones: []Zone{{Name: "lan.", Resolver: "192.0.2.53:53",
			Client: transport.MsgFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
				return answerFromQuery(q)
			})}},
		Pool: &fakePool{OnExchange: func(_ context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
			m, err := answerFromQuery(q)
			if err != nil {
				return actors.Result{Err: err, Upstream: "primary", Attempts: trail}
			}
			return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary", Attempts: trail}
		}},
		Hooks: hooks,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// FuzzServe's handler reaches every source with its seeds, and its fakes
// answer the way answerFromQuery says: the fuzzer starts from answers, not
// from SERVFAILs.
func TestFuzzServeHandler(t *testing.T) {
	t.Parallel()
	h := newFuzzHandler(t, nil)
	for _, tc := range []struct {
		name    string
		proto   string
		rcode   int
		answers int // -1: truncated over UDP, some records
	}{
		{"localhost.", ProtoUDP, dns.RcodeSuccess, 1},
		{"nas.lan.", ProtoUDP, dns.RcodeSuccess, 1},
		{"many.lan.", "tcp", dns.RcodeSuccess, 80},
		{"many.lan.", ProtoUDP, dns.RcodeSuccess, -1},
		{"printer.lan.", ProtoUDP, dns.RcodeSuccess, len("printer.lan.")},
		{"www.example.org.", "tcp", dns.RcodeSuccess, len("www.example.org.")},
		{strings.Repeat("a", 60) + ".example.org.", ProtoUDP, dns.RcodeSuccess, -1},
		{"fail.example.org.", ProtoUDP, dns.RcodeServerFailure, 0},
		{"nxdomain.example.", ProtoUDP, dns.RcodeNameError, 0},
	} {
		q := newQuery(tc.name, dns.TypeA)
		m, _ := exchange(t, h, q, tc.proto)
		checkEcho(t, q, m)
		switch {
		case m.Rcode != tc.rcode:
			t.Errorf("%s over %s: %s, want %s", tc.name, tc.proto, dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
		case tc.answers < 0 && (!m.Truncated || len(m.Answer) == 0):
			t.Errorf("%s over %s: TC=%v with %d records, want truncated", tc.name, tc.proto, m.Truncated, len(m.Answer))
		case tc.answers >= 0 && len(m.Answer) != tc.answers:
			t.Errorf("%s over %s: %d records, want %d", tc.name, tc.proto, len(m.Answer), tc.answers)
		}
	}
}

// answerFromQuery is the fake upstream of FuzzServe: the shape of its
// answer depends on the query, so that the fuzzer can reach every path of
// the answer's way back. The question's first label picks it:
//
//	fail…  the exchange fails
//	refused… / nxdomain… / servfail…  that rcode, no records
//	anything else  NOERROR with as many A records as the name has bytes
//	              (up to 255: enough to overflow any UDP size)
//
// The client's OPT record comes back with its options, so a fuzzed OPT
// stuffed with options reaches the truncation path.
func answerFromQuery(q *dns.Msg) (*dns.Msg, error) {
	if len(q.Question) != 1 {
		return nil, fmt.Errorf("fake upstream: %d questions", len(q.Question))
	}
	name := q.Question[0].Name
	label, _, _ := strings.Cut(strings.ToLower(name), ".")
	m := new(dns.Msg)
	m.SetReply(q)
	m.Id = q.Id ^ 0x5A5A // transports hand answers over with any ID
	m.RecursionAvailable = true
	switch {
	case strings.HasPrefix(label, "fail"):
		return nil, errors.New("fake upstream: failing on request")
	case strings.HasPrefix(label, "refused"):
		m.Rcode = dns.RcodeRefused
	case strings.HasPrefix(label, "nxdomain"):
		m.Rcode = dns.RcodeNameError
	case strings.HasPrefix(label, "servfail"):
		m.Rcode = dns.RcodeServerFailure
	default:
		for i := range len(name) {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A:   []byte{192, 0, 2, byte(i)},
			})
		}
	}
	if o, _ := findOPT(q.Extra); o != nil {
		echo := dns.Copy(o).(*dns.OPT)
		echo.SetUDPSize(4096)
		m.Extra = append(m.Extra, echo)
	}
	return m, nil
}

// fuzzRecords are FuzzServe's local records: a name with several types, a
// CNAME chain, and a name whose answer overflows 512 bytes.
func fuzzRecords(tb testing.TB) []Record {
	long := strings.Repeat("long text ", 60) // 600 bytes: three strings
	rs := mustRRs(tb,
		"nas.lan. 300 IN A 192.168.1.10",
		"nas.lan. 300 IN AAAA fd00::10",
		"files.lan. 300 IN CNAME nas.lan.",
		"www.lan. 300 IN CNAME files.lan.",
		"10.1.168.192.in-addr.arpa. 300 IN PTR nas.lan.",
	)
	rs = append(rs, &dns.TXT{
		Hdr: dns.RR_Header{Name: "nas.lan.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300},
		Txt: []string{long[:255], long[255:510], long[510:]},
	})
	for i := range 80 {
		rs = append(rs, mustRRs(tb, fmt.Sprintf("many.lan. 60 IN A 10.0.0.%d", i))...)
	}
	return rs
}

// fuzzServeSeeds are client queries reaching every step of the resolution
// order, packed.
func fuzzServeSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var ms []*dns.Msg
	add := func(m *dns.Msg) { ms = append(ms, m) }
	for _, name := range []string{
		"localhost.", "db.localhost.", "invalid.", "1.0.0.127.in-addr.arpa.",
		"nas.lan.", "files.lan.", "many.lan.", "printer.lan.", "lan.",
		"www.example.org.", "fail.example.org.", "refused.example.org.", "nxdomain.example.",
		strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + ".",
	} {
		add(newQuery(name, dns.TypeA))
		add(withEDNS(newQuery(name, dns.TypeAAAA), 1232, true))
	}
	add(withEDNS(newQuery("many.lan.", dns.TypeA), 4096, false))
	add(withEDNS(newQuery("www.example.org.", dns.TypeA), 100, false)) // below 512
	notify := newQuery("www.example.org.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	add(notify)
	two := newQuery("www.example.org.", dns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	add(two)
	none := newQuery("www.example.org.", dns.TypeA)
	none.Question = nil
	add(none)
	badVers := withEDNS(newQuery("www.example.org.", dns.TypeA), 1232, false)
	badVers.IsEdns0().SetVersion(1)
	add(badVers)
	twoOPT := withEDNS(newQuery("www.example.org.", dns.TypeA), 1232, false)
	twoOPT.Extra = append(twoOPT.Extra, dns.Copy(twoOPT.Extra[0]))
	add(twoOPT)
	cookie := withEDNS(newQuery("www.example.org.", dns.TypeA), 512, true)
	cookie.IsEdns0().Option = append(cookie.IsEdns0().Option,
		&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"},
		&dns.EDNS0_PADDING{Padding: make([]byte, 400)})
	add(cookie)
	tsigLike := newQuery("www.example.org.", dns.TypeA)
	tsigLike.Ns = []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: "example.org.", Rrtype: dns.TypeNS, Class: dns.ClassINET}, Ns: "ns.example.org."}}
	add(tsigLike)

	out := make([][]byte, 0, len(ms))
	for _, m := range ms {
		out = append(out, mustPack(tb, m))
	}
	return out
}

// fuzzUpstreamSeeds are upstream answers to www.example.org. A, well-formed
// and not: the fuzzer mutates their bytes.
func fuzzUpstreamSeeds(tb testing.TB) []*dns.Msg {
	tb.Helper()
	q := newQuery("www.example.org.", dns.TypeA)
	reply := func() *dns.Msg {
		m := new(dns.Msg).SetReply(q)
		m.Id = 7
		return m
	}
	var ms []*dns.Msg
	ok := reply()
	ok.Answer = mustRRs(tb, "www.example.org. 60 IN CNAME web.example.org.", "web.example.org. 60 IN A 192.0.2.1")
	ms = append(ms, ok)

	big := reply()
	for i := range 200 {
		big.Answer = append(big.Answer, mustRRs(tb, fmt.Sprintf("www.example.org. 60 IN A 10.0.%d.%d", i/256, i%256))...)
	}
	big.SetEdns0(4096, true)
	ms = append(ms, big)

	signed := reply()
	signed.Answer = mustRRs(tb,
		"www.example.org. 60 IN A 192.0.2.1",
		"www.example.org. 60 IN RRSIG A 13 3 60 20300101000000 20200101000000 12345 example.org. dGVzdHNpZ25hdHVyZXRlc3RzaWduYXR1cmV0ZXN0c2lnbmF0dXJl")
	signed.Ns = mustRRs(tb, "example.org. 300 IN NSEC www.example.org. A RRSIG NSEC")
	signed.AuthenticatedData = true
	signed.SetEdns0(1232, true)
	ms = append(ms, signed)

	ext := reply()
	ext.SetEdns0(1232, false)
	ext.Rcode = dns.RcodeBadCookie // needs the OPT's extended bits
	ms = append(ms, ext)

	stuffed := reply()
	stuffed.Answer = mustRRs(tb, "www.example.org. 60 IN A 192.0.2.1")
	stuffed.SetEdns0(4096, false)
	stuffed.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_PADDING{Padding: make([]byte, 1000)}}
	ms = append(ms, stuffed)

	servfail := reply()
	servfail.Rcode = dns.RcodeServerFailure
	ms = append(ms, servfail)

	wrongQ := reply()
	wrongQ.Question[0].Name = "other.example."
	ms = append(ms, wrongQ)

	noQ := reply()
	noQ.Question = nil
	noQ.Truncated = true
	ms = append(ms, noQ)

	twoOPT := reply()
	twoOPT.SetEdns0(1232, false)
	twoOPT.Extra = append(twoOPT.Extra, dns.Copy(twoOPT.Extra[0]))
	ms = append(ms, twoOPT)
	return ms
}

package wiretest

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// ReplyWireID is the wire ID ReplyQuery was sent with; the query's own ID
// differs, to prove that a decoder restores it.
const ReplyWireID = 0x1234

// ReplyQuery is the query ReplySeeds answer: mixed case and EDNS with DO,
// as a client might send it.
func ReplyQuery() *dns.Msg {
	q := new(dns.Msg).SetQuestion("Www.Example.org.", dns.TypeA)
	q.Id = 0xBEEF
	q.SetEdns0(1232, true)
	return q
}

// ReplySeeds are answers to ReplyQuery, packed with ReplyWireID, the seeds
// of the fuzz targets of answer checks (wire/transport's FuzzDecodeReply,
// wire/dnsmsg's FuzzAnswerLayout):
// good ones, and each kind of fault a transport must recognise.
func ReplySeeds(tb testing.TB) [][]byte {
	tb.Helper()
	q := ReplyQuery()
	reply := func(edit func(r *dns.Msg)) []byte {
		r := new(dns.Msg).SetReply(q)
		r.Id = ReplyWireID
		r.RecursionAvailable = true
		edit(r)
		return mustPack(tb, r)
	}
	a := func(i int) dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: "www.example.org.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
			A: net.IPv4(192, 0, 2, byte(i))}
	}
	answered := reply(func(r *dns.Msg) {
		r.Answer = []dns.RR{a(1)}
		r.SetEdns0(1232, true)
	})
	seeds := [][]byte{
		answered,
		reply(func(r *dns.Msg) { r.Question[0].Name = "WWW.EXAMPLE.ORG." }), // 0x20 case
		reply(func(r *dns.Msg) { r.Rcode = dns.RcodeServerFailure }),
		reply(func(r *dns.Msg) { r.Rcode = dns.RcodeNameError; r.Answer = nil }),
		reply(func(r *dns.Msg) { r.Rcode = dns.RcodeRefused }),
		reply(func(r *dns.Msg) { r.Rcode = dns.RcodeRefused; r.Question = nil }), // header-only REFUSED
		reply(func(r *dns.Msg) { r.Id++ }),
		reply(func(r *dns.Msg) { r.Question[0].Name = "wrong.example." }),
		reply(func(r *dns.Msg) { r.Question[0].Qtype = dns.TypeAAAA }),
		reply(func(r *dns.Msg) { r.Question = append(r.Question, r.Question[0]) }),
		reply(func(r *dns.Msg) { r.Response = false }), // the query echoed
		reply(func(r *dns.Msg) { r.Truncated = true }),
		reply(func(r *dns.Msg) { // oversized: far past any UDP size
			for i := range 300 {
				r.Answer = append(r.Answer, a(i))
			}
		}),
		reply(func(r *dns.Msg) { r.SetEdns0(4096, true); r.Rcode = dns.RcodeBadCookie }),
		answered[:len(answered)-5], // cut short
		answered[:12],
		answered[:11],
		{},
		// A compression pointer that points at itself.
		{0x12, 0x34, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 0x0C, 0, 1, 0, 1},
	}
	trunc := reply(func(r *dns.Msg) { r.Truncated = true; r.Answer = []dns.RR{a(1), a(2)} })
	seeds = append(seeds, trunc[:len(trunc)-7]) // TC set, cut in the middle of a record
	return seeds
}

// mustPack packs m or fails tb.
func mustPack(tb testing.TB, m *dns.Msg) []byte {
	tb.Helper()
	b, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

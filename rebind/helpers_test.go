package rebind

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// answer builds a response to name/qtype holding records, given in zone
// file format, each in the section its prefix names ("an ", "ns ", "ar "
// or none for the answer section), and packs it with compression, as
// upstreams send them. It carries an OPT with DO, as the pool asks.
func answer(tb testing.TB, name string, qtype uint16, records ...string) (*dns.Msg, []byte) {
	tb.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Response, m.RecursionAvailable, m.Id = true, true, 0x4242
	for _, r := range records {
		sec := &m.Answer
		switch {
		case strings.HasPrefix(r, "ns "):
			sec, r = &m.Ns, r[3:]
		case strings.HasPrefix(r, "ar "):
			sec, r = &m.Extra, r[3:]
		case strings.HasPrefix(r, "an "):
			r = r[3:]
		}
		rr, err := dns.NewRR(r)
		if err != nil {
			tb.Fatalf("dns.NewRR(%q): %v", r, err)
		}
		*sec = append(*sec, rr)
	}
	m.SetEdns0(1232, true)
	m.Compress = true
	raw, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return m, raw
}

// sig is an RRSIG covering typ at owner, in zone file format.
func sig(owner, typ string) string {
	return owner + " 300 IN RRSIG " + typ + " 13 2 300 20261231000000 20261201000000 12345 example.com. " +
		"ZmFrZXNpZ25hdHVyZWZha2VzaWduYXR1cmVmYWtlc2lnbmF0dXJlZmFrZXNpZ25hdHVyZWZha2VzaWduYXR1cmU="
}

// texts renders rrs, one record a line, to compare sections.
func texts(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rr.String())
		}
	}
	return out
}

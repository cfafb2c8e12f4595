package query

import (
	"slices"
	"testing"

	"github.com/miekg/dns"
)

func TestServeSpecialNames(t *testing.T) {
	t.Parallel()
	const soaLocalhost = "localhost.\t10800\tIN\tSOA\tlocalhost. nobody.invalid. 1 3600 1200 604800 10800"
	tests := []struct {
		name   string
		qname  string
		qtype  uint16
		qclass uint16 // IN when 0
		rcode  int
		answer []string
		ns     []string
	}{
		{name: "localhost A", qname: "localhost.", qtype: dns.TypeA,
			answer: []string{"localhost.\t10800\tIN\tA\t127.0.0.1"}},
		{name: "localhost AAAA, case kept", qname: "LocalHost.", qtype: dns.TypeAAAA,
			answer: []string{"LocalHost.\t10800\tIN\tAAAA\t::1"}},
		{name: "localhost MX is NODATA", qname: "localhost.", qtype: dns.TypeMX,
			ns: []string{soaLocalhost}},
		{name: "localhost ANY", qname: "localhost.", qtype: dns.TypeANY,
			answer: []string{"localhost.\t10800\tIN\tA\t127.0.0.1", "localhost.\t10800\tIN\tAAAA\t::1"}},
		{name: "localhost in class CH holds nothing", qname: "localhost.", qtype: dns.TypeA, qclass: dns.ClassCHAOS,
			ns: []string{soaLocalhost}},
		{name: "below localhost", qname: "db.app.localhost.", qtype: dns.TypeA,
			answer: []string{"db.app.localhost.\t10800\tIN\tA\t127.0.0.1"}},
		{name: "below localhost AAAA", qname: "x.LOCALHOST.", qtype: dns.TypeAAAA,
			answer: []string{"x.LOCALHOST.\t10800\tIN\tAAAA\t::1"}},
		{name: "invalid", qname: "invalid.", qtype: dns.TypeA, rcode: dns.RcodeNameError,
			ns: []string{"invalid.\t10800\tIN\tSOA\tlocalhost. nobody.invalid. 1 3600 1200 604800 10800"}},
		{name: "below invalid", qname: "host.Invalid.", qtype: dns.TypeAAAA, rcode: dns.RcodeNameError,
			ns: []string{"invalid.\t10800\tIN\tSOA\tlocalhost. nobody.invalid. 1 3600 1200 604800 10800"}},
		{name: "IPv4 loopback PTR", qname: "1.0.0.127.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"1.0.0.127.in-addr.arpa.\t10800\tIN\tPTR\tlocalhost."}},
		{name: "IPv6 loopback PTR", qname: loopbackPTR6, qtype: dns.TypePTR,
			answer: []string{loopbackPTR6 + "\t10800\tIN\tPTR\tlocalhost."}},
		{name: "loopback PTR name asked for A", qname: "1.0.0.127.IN-ADDR.ARPA.", qtype: dns.TypeA,
			ns: []string{"1.0.0.127.in-addr.arpa.\t10800\tIN\tSOA\tlocalhost. nobody.invalid. 1 3600 1200 604800 10800"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Special names win over any configuration that claims them.
			zone := resolverAnswering(t, dns.RcodeRefused)
			pool := &fakePool{}
			h, rec := newTestHandler(t, HandlerConfig{
				Pool:    pool,
				Zones:   []Zone{{Name: "localhost.", Resolver: "192.0.2.53:53", Client: zone}},
				Records: mustRRs(t, "localhost. 60 IN A 10.0.0.1"),
			})
			q := withEDNS(newQuery(tt.qname, tt.qtype), 1232, true)
			if tt.qclass != 0 {
				q.Question[0].Qclass = tt.qclass
			}
			m, _ := exchange(t, h, q, ProtoUDP)
			checkEcho(t, q, m)
			if m.Rcode != tt.rcode || !m.Authoritative || !m.RecursionAvailable {
				t.Errorf("rcode %s AA %v RA %v, want %s, AA and RA set", dns.RcodeToString[m.Rcode], m.Authoritative, m.RecursionAvailable, dns.RcodeToString[tt.rcode])
			}
			if got := rrStrings(m.Answer); !slices.Equal(got, tt.answer) {
				t.Errorf("answer =\n%q\nwant\n%q", got, tt.answer)
			}
			if got := rrStrings(m.Ns); !slices.Equal(got, tt.ns) {
				t.Errorf("authority =\n%q\nwant\n%q", got, tt.ns)
			}
			if opt := m.IsEdns0(); opt == nil || !opt.Do() {
				t.Errorf("answer OPT = %v, want one with DO echoed", opt)
			}
			if zone.Calls()+pool.Calls() != 0 {
				t.Errorf("zone asked %d times, pool %d: want neither", zone.Calls(), pool.Calls())
			}
			if e := rec.only(t); e.Source != SourceSpecial || e.Upstream != "" || e.Rcode != tt.rcode || e.QName != tt.qname || e.QType != tt.qtype {
				t.Errorf("entry = %+v, want source special, no upstream, rcode %d, question %s/%d", e, tt.rcode, tt.qname, tt.qtype)
			}
		})
	}
}

// Names that only look special go down the resolution order.
func TestServeNotSpecial(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"xlocalhost.",
		"localhost.com.",
		`a\.localhost.`, // one label at the root, not a name below localhost.
		"invalid.example.",
		// Near 1.0.0.127.in-addr.arpa.; the rest of 127.in-addr.arpa. is
		// a private reverse zone's, answered too (rebind_test.go).
		"1.0.0.128.in-addr.arpa.",
		"x.1.0.0.126.in-addr.arpa.",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool := answeringPool(t)
			h, rec := newTestHandler(t, HandlerConfig{Pool: pool})
			exchange(t, h, newQuery(name, dns.TypeA), ProtoUDP)
			if pool.Calls() != 1 {
				t.Errorf("pool asked %d times, want 1", pool.Calls())
			}
			if e := rec.only(t); e.Source != SourcePool {
				t.Errorf("source = %q, want pool", e.Source)
			}
		})
	}
}

func TestLastLabel(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		".":               ".",
		"localhost.":      "localhost.",
		"a.b.localhost.":  "localhost.",
		`a\.localhost.`:   `a\.localhost.`,
		`a.b\.localhost.`: `b\.localhost.`,
		`a\\.localhost.`:  "localhost.", // an escaped backslash, then a real dot
	}
	for in, want := range tests {
		if got := lastLabel(in); got != want {
			t.Errorf("lastLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

package server

import (
	"testing"

	"github.com/miekg/dns"
)

// max-age is the smallest answer TTL, else a negative answer's
// min(SOA TTL, MINIMUM), else 0 (RFC 8484 section 5.1, spec section 14).
func TestCacheMaxAge(t *testing.T) {
	t.Parallel()
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	soa := rr("example.org. 900 IN SOA ns.example.org. host.example.org. 1 7200 3600 1209600 300")
	for _, tc := range []struct {
		name  string
		rcode int
		ans   []dns.RR
		ns    []dns.RR
		want  uint32
	}{
		{"smallest answer TTL", dns.RcodeSuccess, []dns.RR{rr("a.example.org. 300 IN CNAME b.example.org."), rr("b.example.org. 60 IN A 192.0.2.1"), rr("b.example.org. 120 IN A 192.0.2.2")}, []dns.RR{soa}, 60},
		{"answer TTL 0", dns.RcodeSuccess, []dns.RR{rr("a.example.org. 0 IN A 192.0.2.1")}, nil, 0},
		{"a TTL with the top bit set is 0", dns.RcodeSuccess, []dns.RR{rr("a.example.org. 2147483648 IN A 192.0.2.1"), rr("a.example.org. 60 IN A 192.0.2.2")}, nil, 0},
		{"NXDOMAIN: MINIMUM below the SOA's TTL", dns.RcodeNameError, nil, []dns.RR{soa}, 300},
		{"NODATA: the SOA's TTL below MINIMUM", dns.RcodeSuccess, nil, []dns.RR{rr("example.org. 30 IN SOA ns.example.org. host.example.org. 1 7200 3600 1209600 300")}, 30},
		{"NODATA after an NS record", dns.RcodeSuccess, nil, []dns.RR{rr("example.org. 10 IN NS ns.example.org."), soa}, 300},
		{"negative without an SOA", dns.RcodeNameError, nil, nil, 0},
		{"SERVFAIL", dns.RcodeServerFailure, nil, []dns.RR{soa}, 0},
		{"REFUSED", dns.RcodeRefused, nil, nil, 0},
	} {
		m := new(dns.Msg).SetQuestion("a.example.org.", dns.TypeA)
		m.Response, m.Rcode, m.Answer, m.Ns = true, tc.rcode, tc.ans, tc.ns
		m.SetEdns0(1232, true)
		m.Compress = true
		b := pack(t, m)
		if got := CacheMaxAge(b); got != tc.want {
			t.Errorf("%s: max-age %d, want %d", tc.name, got, tc.want)
		}
		// Cut anywhere, it reads nothing past the end and says 0 or
		// what it read whole.
		for i := range b {
			if got := CacheMaxAge(b[:i]); got != 0 && got != tc.want {
				t.Errorf("%s cut at %d: max-age %d", tc.name, i, got)
			}
		}
	}
}

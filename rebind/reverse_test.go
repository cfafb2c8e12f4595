package rebind

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

func TestPrivateReverseZone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		qname, zone string
	}{
		{"1.1.168.192.in-addr.arpa.", "168.192.in-addr.arpa."},
		{"168.192.in-addr.arpa.", "168.192.in-addr.arpa."},
		{"4.3.2.10.IN-ADDR.ARPA.", "10.in-addr.arpa."},
		{"9.9.16.172.in-addr.arpa.", "16.172.in-addr.arpa."},
		{"9.9.31.172.in-addr.arpa.", "31.172.in-addr.arpa."},
		{"9.9.32.172.in-addr.arpa.", ""},
		{"9.9.15.172.in-addr.arpa.", ""},
		{"1.0.0.127.in-addr.arpa.", "127.in-addr.arpa."},
		{"5.4.254.169.in-addr.arpa.", "254.169.in-addr.arpa."},
		{"1.0.64.100.in-addr.arpa.", "64.100.in-addr.arpa."},
		{"1.0.127.100.in-addr.arpa.", "127.100.in-addr.arpa."},
		{"1.0.128.100.in-addr.arpa.", ""},
		{"1.0.63.100.in-addr.arpa.", ""},
		{"7.2.0.192.in-addr.arpa.", "2.0.192.in-addr.arpa."},
		{"255.255.255.255.in-addr.arpa.", "255.255.255.255.in-addr.arpa."},
		{"8.8.8.8.in-addr.arpa.", ""},
		{"in-addr.arpa.", ""},
		{"10.in-addr.arpa.example.com.", ""},
		{"110.in-addr.arpa.", ""},
		{dns.Fqdn(mustReverse(t, "fd00::1")), "d.f.ip6.arpa."},
		{dns.Fqdn(mustReverse(t, "FE80::1")), "8.e.f.ip6.arpa."},
		{dns.Fqdn(mustReverse(t, "febf::1")), "b.e.f.ip6.arpa."},
		{dns.Fqdn(mustReverse(t, "fec0::1")), ""},
		{dns.Fqdn(mustReverse(t, "::1")), "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa."},
		{dns.Fqdn(mustReverse(t, "::")), "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa."},
		{dns.Fqdn(mustReverse(t, "2001:db8::1")), "8.b.d.0.1.0.0.2.ip6.arpa."},
		{dns.Fqdn(mustReverse(t, "2001:4860::8888")), ""},
		{"D.F.IP6.ARPA.", "d.f.ip6.arpa."},
		{"example.com.", ""},
		{".", ""},
		{"", ""},
	} {
		zone, ok := PrivateReverseZone(tc.qname)
		if zone != tc.zone || ok != (tc.zone != "") {
			t.Errorf("PrivateReverseZone(%q) = %q, %v; want %q", tc.qname, zone, ok, tc.zone)
		}
	}
}

func mustReverse(tb testing.TB, addr string) string {
	tb.Helper()
	r, err := dns.ReverseAddr(netip.MustParseAddr(addr).String())
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// RFC 6303 section 4 lists these 33 zones (sixteen of 172.16.0.0/12),
// RFC 7793 another 64; every one is matched as itself.
func TestPrivateReverseZonesTable(t *testing.T) {
	t.Parallel()
	if n := len(PrivateReverseZones); n != 1+16+1+7+2+1+4+1+64 {
		t.Errorf("%d zones", n)
	}
	seen := map[string]bool{}
	for _, z := range PrivateReverseZones {
		if seen[z] {
			t.Errorf("%s twice", z)
		}
		seen[z] = true
		if _, ok := dns.IsDomainName(z); !ok || dns.CanonicalName(z) != z {
			t.Errorf("%q is not a canonical name", z)
		}
		if got, ok := PrivateReverseZone(z); !ok || got != z {
			t.Errorf("PrivateReverseZone(%q) = %q, %v", z, got, ok)
		}
	}
}

func TestPrivateReverseZoneAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, q := range []string{"1.1.168.192.IN-ADDR.ARPA.", "example.com.", "8.8.8.8.in-addr.arpa."} {
		if n := testing.AllocsPerRun(100, func() { _, _ = PrivateReverseZone(q) }); n != 0 {
			t.Errorf("PrivateReverseZone(%q) allocates %v times", q, n)
		}
	}
}

func TestReverseAnswer(t *testing.T) {
	t.Parallel()
	const soa = "168.192.in-addr.arpa.\t10800\tIN\tSOA\t168.192.in-addr.arpa. nobody.invalid. 1 3600 1200 604800 10800"
	const ns = "168.192.in-addr.arpa.\t10800\tIN\tNS\t168.192.in-addr.arpa."
	for _, tc := range []struct {
		qname     string
		qtype     uint16
		rcode     int
		answer    []string
		authority []string
	}{
		{"1.1.168.192.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, nil, []string{soa}},
		{"1.1.168.192.in-addr.arpa.", dns.TypeSOA, dns.RcodeNameError, nil, []string{soa}},
		{"168.192.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, nil, []string{soa}},
		{"168.192.IN-ADDR.arpa.", dns.TypeSOA, dns.RcodeSuccess, []string{soa}, nil},
		{"168.192.in-addr.arpa.", dns.TypeNS, dns.RcodeSuccess, []string{ns}, nil},
		{"168.192.in-addr.arpa.", dns.TypeANY, dns.RcodeSuccess, []string{soa, ns}, nil},
	} {
		m := new(dns.Msg)
		m.SetQuestion(tc.qname, tc.qtype)
		m.Response, m.AuthenticatedData = true, true
		zone, _ := PrivateReverseZone(tc.qname)
		ReverseAnswer(m, zone)
		if m.Rcode != tc.rcode || !m.Authoritative || m.AuthenticatedData ||
			!slices.Equal(texts(m.Answer), tc.answer) || !slices.Equal(texts(m.Ns), tc.authority) {
			t.Errorf("%s %s: rcode %s AA %v AD %v\nanswer %q\nauthority %q", tc.qname, dns.TypeToString[tc.qtype],
				dns.RcodeToString[m.Rcode], m.Authoritative, m.AuthenticatedData, texts(m.Answer), texts(m.Ns))
		}
		if _, err := m.Pack(); err != nil {
			t.Error(err)
		}
	}
}

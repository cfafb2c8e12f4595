package rebind

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// publicAnswers are answers shaped as real ones are, none carrying a
// private address: protection must leave every one byte for byte alone.
func publicAnswers(tb testing.TB) map[string][]byte {
	tb.Helper()
	longTXT := `"` + strings.Repeat("v=spf1 include:_spf.example.net ~all ", 7)[:250] + `"`
	cases := map[string][]string{
		"A and AAAA": {"example.com. 300 IN A 93.184.215.14", "example.com. 300 IN AAAA 2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
		"CNAME chain": {
			"www.example.com. 300 IN CNAME www.example.com.cdn.example.net.",
			"www.example.com.cdn.example.net. 60 IN CNAME e1234.a.cdn.example.org.",
			"e1234.a.cdn.example.org. 20 IN A 23.45.67.89",
			"e1234.a.cdn.example.org. 20 IN A 23.45.67.90",
		},
		"DNSSEC": {
			"example.com. 300 IN A 93.184.215.14", sig("example.com.", "A"),
			"ns example.com. 3600 IN NS a.iana-servers.net.", "ns " + sig("example.com.", "NS"),
			"ar example.com. 3600 IN DNSKEY 257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==",
		},
		"negative with NSEC": {
			"ns example.com. 3600 IN SOA ns.icann.org. noc.dns.icann.org. 2026120101 7200 3600 1209600 3600",
			"ns " + sig("example.com.", "SOA"),
			"ns example.com. 3600 IN NSEC www.example.com. A NS SOA RRSIG NSEC DNSKEY",
			"ns " + sig("example.com.", "NSEC"),
		},
		"large TXT": {
			"example.com. 300 IN TXT " + longTXT + " " + longTXT,
			"example.com. 300 IN TXT " + longTXT,
			"example.com. 300 IN TXT \"google-site-verification=abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG\"",
		},
		"MX with glue": {
			"example.com. 300 IN MX 10 mx1.example.com.", "example.com. 300 IN MX 20 mx2.example.com.",
			"ar mx1.example.com. 300 IN A 198.51.100.25", "ar mx2.example.com. 300 IN AAAA 2001:db8::25",
		},
		"HTTPS with public hints": {
			`example.com. 300 IN HTTPS 1 . alpn="h3,h2" ipv4hint="104.16.132.229,104.16.133.229" ipv6hint="2606:4700::6810:84e5"`,
		},
		"SVCB alias": {"_dns.example.com. 300 IN SVCB 0 dns.example.net."},
		// Near misses of every private range.
		"edges": {
			"example.com. 300 IN A 11.0.0.1", "example.com. 300 IN A 172.15.255.255",
			"example.com. 300 IN A 172.32.0.1", "example.com. 300 IN A 192.169.1.1",
			"example.com. 300 IN A 100.63.255.255", "example.com. 300 IN A 100.128.0.1",
			"example.com. 300 IN A 169.253.1.1", "example.com. 300 IN A 1.0.0.1",
			"example.com. 300 IN AAAA fe00::1", "example.com. 300 IN AAAA fec0::1",
			"example.com. 300 IN AAAA ::2", "example.com. 300 IN AAAA ::ffff:8.8.8.8",
			"example.com. 300 IN AAAA 2001:db8::1",
		},
	}
	out := make(map[string][]byte, len(cases))
	for name, records := range cases {
		q := dns.TypeA
		if strings.HasPrefix(name, "HTTPS") {
			q = dns.TypeHTTPS
		}
		_, raw := answer(tb, "www.example.com.", q, records...)
		out[name] = raw
	}
	return out
}

// Acceptance (spec section 15): answers that carry no private address are
// byte for byte the same with protection on and off, and cost no
// allocation.
func TestPublicAnswersUntouched(t *testing.T) {
	t.Parallel()
	on := New(true, []string{"plex.direct"})
	var off *Filter = New(false, nil)
	for name, raw := range publicAnswers(t) {
		t.Run(name, func(t *testing.T) {
			before := slices.Clone(raw)
			for _, f := range []*Filter{on, off} {
				m, err := f.Strip(raw)
				if m != nil || err != nil {
					t.Fatalf("Strip = %v, %v; want nil, nil", m, err)
				}
			}
			if string(raw) != string(before) {
				t.Fatal("Strip changed the answer's bytes")
			}
			// The parsed path agrees.
			m := new(dns.Msg)
			if err := m.Unpack(raw); err != nil {
				t.Fatal(err)
			}
			if on.StripMsg(m) {
				t.Fatal("StripMsg stripped a public answer")
			}
		})
	}
}

// The scan of a public answer allocates nothing. Not parallel:
// AllocsPerRun counts the whole process.
func TestStripPublicAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	on := New(true, []string{"plex.direct"})
	for name, raw := range publicAnswers(t) {
		if n := testing.AllocsPerRun(100, func() { _, _ = on.Strip(raw) }); n != 0 {
			t.Errorf("%s: Strip allocates %v times", name, n)
		}
	}
	// An exempt local name answered with a private address, as a router
	// in the pool answers, is decided on the bytes too.
	_, raw := answer(t, "nas.lan.", dns.TypeA, "nas.lan. 0 IN A 192.168.1.2")
	if n := testing.AllocsPerRun(100, func() { _, _ = on.Strip(raw) }); n != 0 {
		t.Errorf("Strip of an exempt name allocates %v times", n)
	}
}

func TestPrivateAddressesStripped(t *testing.T) {
	t.Parallel()
	f := New(true, nil)
	for _, tc := range []struct{ typ, addr string }{
		{"A", "192.168.1.1"}, {"A", "10.0.0.1"}, {"A", "127.0.0.1"}, {"A", "172.16.5.4"},
		{"A", "169.254.1.1"}, {"A", "0.0.0.0"}, {"A", "100.64.0.1"}, {"A", "100.127.255.255"},
		{"AAAA", "::1"}, {"AAAA", "::"}, {"AAAA", "fd00::1"}, {"AAAA", "fc00::1"}, {"AAAA", "fe80::1"},
		{"AAAA", "::ffff:192.168.1.1"}, {"AAAA", "::ffff:127.0.0.1"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			qt := dns.StringToType[tc.typ]
			_, raw := answer(t, "evil.example.", qt,
				"evil.example. 60 IN "+tc.typ+" "+tc.addr, sig("evil.example.", tc.typ))
			m, err := f.Strip(raw)
			if err != nil || m == nil {
				t.Fatalf("Strip = %v, %v; want the stripped answer", m, err)
			}
			if len(m.Answer) != 0 {
				t.Errorf("answer section left: %q (the RRSIG of a stripped RRset goes with it)", texts(m.Answer))
			}
			if m.Rcode != dns.RcodeSuccess {
				t.Errorf("rcode %s, want NOERROR (NODATA)", dns.RcodeToString[m.Rcode])
			}
			if m.IsEdns0() == nil {
				t.Error("the OPT record is gone")
			}
		})
	}
}

// Only the private records go; the public ones, and the signature of an
// RRset that lost nothing, stay. The AD bit goes (spec section 10).
func TestMixedAnswerKeepsPublicRecords(t *testing.T) {
	t.Parallel()
	want, _ := answer(t, "a.example.", dns.TypeA,
		"a.example. 60 IN CNAME b.example.", sig("a.example.", "CNAME"),
		"b.example. 60 IN A 203.0.113.7")
	orig, raw := answer(t, "a.example.", dns.TypeA,
		"a.example. 60 IN CNAME b.example.", sig("a.example.", "CNAME"),
		"b.example. 60 IN A 10.1.2.3", "b.example. 60 IN A 203.0.113.7", sig("b.example.", "A"),
		"ar ns1.example. 60 IN AAAA fd12::53", "ar ns2.example. 60 IN AAAA 2001:db8::53")
	orig.AuthenticatedData = true
	raw, _ = orig.Pack()
	m, err := New(true, nil).Strip(raw)
	if err != nil || m == nil {
		t.Fatalf("Strip = %v, %v", m, err)
	}
	if got, w := texts(m.Answer), texts(want.Answer); !slices.Equal(got, w) {
		t.Errorf("answer:\n%q\nwant\n%q", got, w)
	}
	if got := texts(m.Extra); !slices.Equal(got, []string{"ns2.example.\t60\tIN\tAAAA\t2001:db8::53"}) {
		t.Errorf("additional: %q", got)
	}
	if m.AuthenticatedData {
		t.Error("a stripped answer keeps AD")
	}
}

func TestHTTPSHintsStripped(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"HTTPS", "SVCB"} {
		_, raw := answer(t, "svc.example.", dns.StringToType[typ],
			`svc.example. 300 IN `+typ+` 1 . alpn="h2" ipv4hint="192.168.1.10,198.51.100.10" ipv6hint="fd00::10"`,
			sig("svc.example.", typ))
		m, err := New(true, nil).Strip(raw)
		if err != nil || m == nil {
			t.Fatalf("%s: Strip = %v, %v", typ, m, err)
		}
		got := texts(m.Answer)
		want := []string{`svc.example.	300	IN	` + typ + `	1 . alpn="h2" ipv4hint="198.51.100.10"`}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n%q\nwant\n%q", typ, got, want)
		}
	}
}

func TestExemptNames(t *testing.T) {
	t.Parallel()
	f := New(true, []string{"plex.direct.", "Home.Example.ORG"})
	for _, tc := range []struct {
		name    string
		qname   string
		records []string
		exempt  bool
	}{
		{"under rebind_allow", "192-168-1-5.abc.plex.direct.", []string{"192-168-1-5.abc.plex.direct. 60 IN A 192.168.1.5"}, true},
		{"rebind_allow itself, any case", "HOME.example.org.", []string{"home.example.org. 60 IN A 192.168.1.5"}, true},
		{"CNAME chain into rebind_allow", "media.example.com.", []string{
			"media.example.com. 60 IN CNAME x.example.net.",
			"x.example.net. 60 IN CNAME 10-0-0-9.abc.plex.direct.",
			"10-0-0-9.abc.plex.direct. 60 IN A 10.0.0.9"}, true},
		{"single label", "nas.", []string{"nas. 0 IN A 192.168.1.2"}, true},
		{"lan.", "nas.lan.", []string{"nas.lan. 0 IN A 192.168.1.2"}, true},
		{"home.arpa.", "printer.home.arpa.", []string{"printer.home.arpa. 0 IN AAAA fd00::2"}, true},
		{"local.", "tv.local.", []string{"tv.local. 0 IN A 192.168.1.3"}, true},
		{"internal.", "git.corp.internal.", []string{"git.corp.internal. 0 IN A 10.9.9.9"}, true},
		// A public name pointing into the home network by CNAME is the
		// rebinding attack itself: local names exempt only when asked.
		{"CNAME into lan. is not exempt", "evil.example.", []string{
			"evil.example. 60 IN CNAME nas.lan.", "nas.lan. 60 IN A 192.168.1.2"}, false},
		{"a lookalike of rebind_allow", "plex.directx.", []string{"plex.directx. 60 IN A 192.168.1.5"}, false},
		{"a name ending in lan", "evillan.", []string{"x.evillan. 60 IN A 192.168.1.5"}, true}, // single label
		{"not below lan.", "nas.xlan.", []string{"nas.xlan. 60 IN A 192.168.1.2"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, raw := answer(t, tc.qname, dns.TypeA, tc.records...)
			m, err := f.Strip(raw)
			if err != nil {
				t.Fatal(err)
			}
			if exempt := m == nil; exempt != tc.exempt {
				t.Errorf("exempt = %v, want %v", exempt, tc.exempt)
			}
		})
	}
}

// A nil Filter (server.rebind_protection = false) strips nothing.
func TestProtectionOff(t *testing.T) {
	t.Parallel()
	orig, raw := answer(t, "evil.example.", dns.TypeA, "evil.example. 60 IN A 192.168.1.1")
	f := New(false, nil)
	if m, err := f.Strip(raw); m != nil || err != nil {
		t.Fatalf("Strip = %v, %v", m, err)
	}
	if f.StripMsg(orig) || len(orig.Answer) != 1 {
		t.Fatal("StripMsg stripped with protection off")
	}
}

func TestPrivate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"10.255.255.255", true}, {"172.31.0.1", true}, {"172.32.0.1", false}, {"192.168.0.0", true},
		{"127.1.2.3", true}, {"169.254.0.1", true}, {"0.1.2.3", true}, {"100.64.0.0", true},
		{"100.127.0.1", true}, {"100.128.0.1", false}, {"8.8.8.8", false},
		{"::1", true}, {"::", true}, {"fd00::1", true}, {"fe80::1%eth0", true}, {"febf::1", true},
		{"fec0::1", false}, {"::ffff:10.0.0.1", true}, {"::ffff:1.1.1.1", false}, {"2001:db8::1", false},
	} {
		if got := Private(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Private(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
	if Private(netip.Addr{}) {
		t.Error("the zero Addr is private")
	}
}

func TestRouterAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"192.168.1.1", true}, {"10.0.0.1", true}, {"172.20.0.1", true}, {"fd00::1", true},
		{"::ffff:192.168.1.1", true}, {"127.0.0.1", false}, {"100.64.0.1", false}, {"9.9.9.9", false},
		{"fe80::1", false},
	} {
		if got := RouterAddress(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("RouterAddress(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// An answer whose bytes the scan cannot walk is parsed, and one that
// cannot be parsed is an error, never passed on as safe.
func TestUnwalkableAnswer(t *testing.T) {
	t.Parallel()
	_, raw := answer(t, "evil.example.", dns.TypeA, "evil.example. 60 IN A 192.168.1.1")
	cut := raw[:len(raw)-3]
	if m, err := New(true, nil).Strip(cut); err == nil {
		t.Fatalf("Strip of a cut answer = %v, nil; want an error", m)
	}
}

func TestNameHelpers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, zone string
		want       bool
	}{
		{"a.lan.", "lan.", true}, {"lan.", "lan.", true}, {"A.LAN.", "lan.", true},
		{"alan.", "lan.", false}, {`a\.lan.`, "lan.", false}, {`a\\.lan.`, "lan.", true},
		{"x.", ".", true}, {"an.", "lan.", false},
	} {
		if got := under(tc.name, tc.zone); got != tc.want {
			t.Errorf("under(%q, %q) = %v", tc.name, tc.zone, got)
		}
	}
	for name, want := range map[string]bool{"nas.": true, "a.b.": false, ".": false, `a\.b.`: true, "": false} {
		if got := singleLabel(name); got != want {
			t.Errorf("singleLabel(%q) = %v", name, got)
		}
	}
}

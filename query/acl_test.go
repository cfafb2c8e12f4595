package query

import (
	"context"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/server"
)

// A client outside Allow is answered REFUSED with EDE 18 and nothing else
// is done; a client inside it (a link-local one with its zone included) is
// served; a nil Allow serves everyone, an empty one no one.
func TestAllow(t *testing.T) {
	t.Parallel()
	pool := answeringPool(t, "example.com. 300 IN A 192.0.2.1")
	allow := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("fe80::/10")}
	h, rec := newTestHandler(t, HandlerConfig{Pool: pool, Allow: allow})
	askFrom := func(h *Handler, client string) *dns.Msg {
		t.Helper()
		raw := mustPack(t, withEDNS(newQuery("example.com.", dns.TypeA), 1232, false))
		out := h.ServeDNS(context.Background(), &server.Request{Raw: raw, Proto: ProtoUDP, Client: netip.MustParseAddrPort(client)})
		m := new(dns.Msg)
		if err := m.Unpack(out); err != nil {
			t.Fatalf("%s: %v", client, err)
		}
		return m
	}
	for _, c := range []string{"192.0.2.7:5353", "[fe80::1%eth0]:5353"} {
		if m := askFrom(h, c); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
			t.Errorf("%s, inside: %v", c, m)
		}
	}
	calls := pool.Calls()
	for _, c := range []string{"198.51.100.1:5353", "[2001:db8::1]:5353"} {
		m := askFrom(h, c)
		if got := ede(m); m.Rcode != dns.RcodeRefused || len(got) != 1 || got[0].InfoCode != 18 || len(m.Answer) != 0 {
			t.Errorf("%s, outside: %s EDE %v, want REFUSED with EDE 18", c, dns.RcodeToString[m.Rcode], got)
		}
		if e := rec.last(); e.Source != SourceRefused || e.Rcode != dns.RcodeRefused {
			t.Errorf("%s: entry source %q rcode %d, want refused", c, e.Source, e.Rcode)
		}
	}
	if pool.Calls() != calls {
		t.Errorf("an outsider's query reached the pool")
	}

	everyone, _ := newTestHandler(t, HandlerConfig{Pool: pool})
	if m := askFrom(everyone, "198.51.100.1:5353"); m.Rcode != dns.RcodeSuccess {
		t.Errorf("nil Allow: %s, want everyone served", dns.RcodeToString[m.Rcode])
	}
	noone, _ := newTestHandler(t, HandlerConfig{Pool: pool, Allow: []netip.Prefix{}})
	if m := askFrom(noone, "192.0.2.7:5353"); m.Rcode != dns.RcodeRefused {
		t.Errorf("empty Allow: %s, want no one served", dns.RcodeToString[m.Rcode])
	}
}

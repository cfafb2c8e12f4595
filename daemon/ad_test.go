package daemon

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// validating is a fake validating resolver, as Unbound behaves: every
// answer it gives has validated, and it says so with AD only to a query
// that set AD or DO (RFC 6840 5.7). It counts the queries it saw without
// AD: nxdnsd sets AD on every query it sends (spec section 10).
func validating(withoutAD *atomic.Int64) wiretest.Handler {
	return func(w *wiretest.Writer, q *dns.Msg) {
		do := q.IsEdns0() != nil && q.IsEdns0().Do()
		if !q.AuthenticatedData {
			withoutAD.Add(1)
		}
		a := wiretest.A(q.Question[0].Name, 0)
		a.Hdr.Ttl = 300
		r := new(dns.Msg).SetReply(q)
		r.RecursionAvailable = true
		r.AuthenticatedData = q.AuthenticatedData || do
		r.Answer = []dns.RR{a}
		if q.IsEdns0() != nil {
			r.SetEdns0(1232, do)
		}
		w.WriteMsg(r)
	}
}

// The AD bit follows RFC 6840 5.7–5.8 (spec section 10) fresh and cached,
// over UDP and TCP, through the pool and a forward zone: an answer carries
// AD only when the upstream set it and the client set AD or DO, whichever
// client filled the cache first.
func TestADBitFreshAndCached(t *testing.T) {
	var upWithoutAD, zoneWithoutAD atomic.Int64
	up := wiretest.NewServer(t, validating(&upWithoutAD))
	lan := wiretest.NewServer(t, validating(&zoneWithoutAD))
	s := startDaemon(t, upstreamTOML(up.Addr)+cacheTOML("")+fmt.Sprintf(`
[[forward_zones]]
zone = "lan."
resolver = %q
`, lan.Addr))

	type client struct{ ad, do bool }
	query := func(name string, c client) *dns.Msg {
		q := wiretest.Query(name, dns.TypeA)
		q.AuthenticatedData = c.ad
		if c.do {
			q.SetEdns0(1232, true)
		}
		return q
	}
	for _, zone := range []string{"example.", "lan."} {
		for _, proto := range []string{"udp", "tcp"} {
			for _, do := range []bool{false, true} {
				for _, firstAD := range []bool{false, true} {
					name := fmt.Sprintf("%s-do%v-ad%v.%s", proto, do, firstAD, zone)
					// The first client fills the entry and gets a fresh
					// answer; the other one, and the first again, come
					// from the cache.
					for i, c := range []client{{firstAD, do}, {!firstAD, do}, {firstAD, do}} {
						r := ask(t, proto, s.addr(proto), query(name, c))
						if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
							t.Fatalf("%s query %d (AD %v, DO %v): %v", name, i, c.ad, c.do, r)
						}
						if want := c.ad || c.do; r.AuthenticatedData != want {
							t.Errorf("%s over %s, query %d (AD %v, DO %v): AD %v, want %v",
								name, proto, i, c.ad, c.do, r.AuthenticatedData, want)
						}
					}
				}
			}
		}
	}
	if n := up.UDPQueries() + up.TCPQueries(); n != 8 {
		t.Errorf("the pool's upstream saw %d queries, want 8: one per name and DO bit, AD keys nothing", n)
	}
	if n := lan.UDPQueries() + lan.TCPQueries(); n != 8 {
		t.Errorf("the zone's resolver saw %d queries, want 8", n)
	}
	if n, m := upWithoutAD.Load(), zoneWithoutAD.Load(); n != 0 || m != 0 {
		t.Errorf("queries sent without AD: %d to the pool, %d to the zone; want none", n, m)
	}
}

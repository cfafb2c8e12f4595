package daemon

import (
	"context"
	"fmt"
	"github.com/nxdnsd/nxdnsd/internal/netnstest"
	"net"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// lanClient is a home network's client address, put on lo in the test's
// own network namespace: a client nxdnsd names by its PTR record.
const lanClient = "192.168.1.50"

// askNamed sends a query for name over UDP from the local address from to
// addr.
func askNamed(tb testing.TB, from, addr, name string) *dns.Msg {
	tb.Helper()
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(from)}}}
	r, _, err := c.ExchangeContext(context.Background(), wiretest.Query(name, dns.TypeA), addr)
	if err != nil {
		tb.Fatalf("query %s from %s: %v", name, from, err)
	}
	return r
}

// Issue 30: a PTR answered by a fake forward-zone resolver names the
// client, in the log lines of its queries after the lookup; the lookup
// runs beside its first query, which is logged with its address alone.
// The pool is never asked the PTR. In a network namespace of its own,
// where the client's private address is on lo.
func TestPTRNamesClient(t *testing.T) {
	if !netnstest.InOwn(t) {
		return
	}
	if out, err := exec.CommandContext(t.Context(), "ip", "addr", "add", lanClient+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s: %v: %s", lanClient, err, out)
	}
	pool := &ptrCounter{name: "wrong.example."}
	zone := &ptrCounter{name: "tablet.lan."}
	up := wiretest.NewServer(t, pool.handle)
	router := wiretest.NewServer(t, zone.handle)
	onChange, changed := changes()
	o := startObserved(t, upstreamTOML(up.Addr)+fmt.Sprintf(`
[[forward_zones]]
zone = "168.192.in-addr.arpa."
resolver = %q
`, router.Addr), false, options{onClientsChange: onChange})

	askNamed(t, lanClient, o.udp, "one.example.")
	waitName(t, o.d, changed, netip.MustParseAddr(lanClient), "tablet.lan")
	askNamed(t, lanClient, o.udp, "two.example.")

	lines := o.logLines(t)
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2", len(lines))
	}
	if c := deref(lines[0].Client); lines[0].ClientName != "" || netip.MustParseAddrPort(c).Addr().String() != lanClient {
		t.Errorf("first query: client %s name %q; want %s, no name yet", c, lines[0].ClientName, lanClient)
	}
	if lines[1].ClientName != "tablet.lan" {
		t.Errorf("second query: client_name %q, want tablet.lan", lines[1].ClientName)
	}
	if zone.ptrs.Load() != 1 || pool.ptrs.Load() != 0 {
		t.Errorf("PTR queries: zone %d, pool %d; want 1 and 0", zone.ptrs.Load(), pool.ptrs.Load())
	}
}

// Acceptance of issue 30: client names never delay a query. While the
// PTR lookup of a new client hangs at the forward zone's resolver, the
// client's queries are answered (unnamed); its first query started the
// lookup, the second started none.
func TestPTRLookupNeverDelaysQueries(t *testing.T) {
	if !netnstest.InOwn(t) {
		return
	}
	if out, err := exec.CommandContext(t.Context(), "ip", "addr", "add", lanClient+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s: %v: %s", lanClient, err, out)
	}
	zone := &ptrCounter{name: "tablet.lan."}
	held, release := releaser(t)
	asked := make(chan string, 4)
	up := wiretest.NewServer(t, wiretest.Answer())
	router := wiretest.NewServer(t, wiretest.Notify(asked, wiretest.Gate(held, zone.handle)))
	o := startObserved(t, upstreamTOML(up.Addr)+fmt.Sprintf(`
[[forward_zones]]
zone = "168.192.in-addr.arpa."
resolver = %q
`, router.Addr), false, options{})

	if r := askNamed(t, lanClient, o.udp, "one.example."); len(r.Answer) != 1 {
		t.Fatalf("first query: %v, want the upstream's answer", r.Answer)
	}
	<-asked // the lookup is at the resolver, held there
	if r := askNamed(t, lanClient, o.udp, "two.example."); len(r.Answer) != 1 {
		t.Fatalf("second query: %v, want the upstream's answer", r.Answer)
	}
	for i, l := range o.logLines(t) {
		if l.ClientName != "" {
			t.Errorf("line %d: client_name %q while the lookup is held, want none", i, l.ClientName)
		}
	}
	if n := o.d.clients.Stats().PTRLookups; n != 1 {
		t.Errorf("%d PTR lookups started, want 1 (the second query's is pending)", n)
	}
	release()
}

package wiretest

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The actors' loop checks are answered NXDOMAIN, as an honest resolver
// answers any name under invalid., and kept apart like probes: neither the
// test's handler nor its probe handler sees them, and they are counted in
// LoopChecks only.
func TestLoopChecksAreKeptApart(t *testing.T) {
	t.Parallel()
	received := make(chan string, 4)
	srv := NewServer(t, Notify(received, Answer()))
	srv.HandleProbes(Rcode(dns.RcodeRefused))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const check = "0123456789abcdef.00000001.00000001.LOOP-CHECK.nxdnsd.invalid."
	for _, proto := range []string{"udp", "tcp"} {
		r, _, err := (&dns.Client{Net: proto}).ExchangeContext(ctx, Query(check, dns.TypeTXT), srv.Addr)
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		if r.Rcode != dns.RcodeNameError {
			t.Errorf("%s: rcode %s, want NXDOMAIN", proto, dns.RcodeToString[r.Rcode])
		}
	}
	if len(received) != 0 || srv.LoopChecks() != 2 || srv.Probes() != 0 || srv.UDPQueries()+srv.TCPQueries() != 0 {
		t.Errorf("handled=%d checks=%d probes=%d queries=%d, want 0, 2, 0, 0",
			len(received), srv.LoopChecks(), srv.Probes(), srv.UDPQueries()+srv.TCPQueries())
	}
}

package wiretest

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Health probes (". NS") do not reach the test's handler and are not
// counted with its queries: they are answered, or served by the probe
// handler the test sets, and counted apart.
func TestProbesAreKeptApart(t *testing.T) {
	t.Parallel()
	received := make(chan string, 4)
	srv := NewServer(t, Notify(received, Answer()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	exchange := func(proto string, q *dns.Msg) *dns.Msg {
		t.Helper()
		r, _, err := (&dns.Client{Net: proto}).ExchangeContext(ctx, q, srv.Addr)
		if err != nil {
			t.Fatalf("%s %s: %v", proto, q.Question[0].String(), err)
		}
		return r
	}

	for _, proto := range []string{"udp", "tcp"} {
		r := exchange(proto, Query(".", dns.TypeNS))
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeNS {
			t.Errorf("%s: the default probe answer %v", proto, r)
		}
		exchange(proto, Query(".", dns.TypeA)) // not a probe: the root's A
	}
	if len(received) != 2 {
		t.Errorf("the handler saw %d queries, want the 2 that are not probes", len(received))
	}
	if srv.Probes() != 2 || srv.UDPQueries() != 1 || srv.TCPQueries() != 1 {
		t.Errorf("probes=%d udp=%d tcp=%d, want 2, 1, 1", srv.Probes(), srv.UDPQueries(), srv.TCPQueries())
	}

	srv.HandleProbes(Rcode(dns.RcodeRefused))
	if r := exchange("udp", Query(".", dns.TypeNS)); r.Rcode != dns.RcodeRefused {
		t.Errorf("with a probe handler: rcode %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	srv.HandleProbes(nil)
	if r := exchange("udp", Query(".", dns.TypeNS)); r.Rcode != dns.RcodeSuccess {
		t.Errorf("with the default restored: rcode %s", dns.RcodeToString[r.Rcode])
	}
	if srv.Probes() != 4 || len(received) != 2 {
		t.Errorf("probes=%d handled=%d, want 4 and 2", srv.Probes(), len(received))
	}
}

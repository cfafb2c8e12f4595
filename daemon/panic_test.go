package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/transport"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Issue 7's acceptance for crash containment, end to end: a panic while
// one query is served (here in the upstream's transport, through the
// daemon's test seam) answers that client SERVFAIL with its ID and
// question, counts once in nxdns_panics_total, and the next query, on the
// same protocol, is answered. The listener's own test checks the log line
// and its stack.
func TestPanicInOneQuery(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	panicky := func(_ int, x transport.Exchanger) transport.Exchanger {
		return transport.ExchangerFunc(func(ctx context.Context, q *transport.Query, expiry time.Time) (transport.Answer, error) {
			if strings.HasPrefix(q.Msg.Question[0].Name, "panic.") {
				panic("injected by the test")
			}
			return x.Exchange(ctx, q, expiry)
		})
	}
	// One slot: a panic that kept its permit would starve the next query.
	s := startObserved(t, slotsTOML(1, up.Addr), false, options{exchanger: panicky})

	for i, proto := range []string{"udp", "tcp"} {
		q := wiretest.Query("panic.example.", dns.TypeA)
		r := ask(t, proto, s.addr(proto), q)
		if r.Id != q.Id || r.Rcode != dns.RcodeServerFailure || len(r.Question) != 1 || r.Question[0] != q.Question[0] {
			t.Fatalf("%s: answer to the panicking query: %v; want SERVFAIL with its ID and question", proto, r)
		}
		if v := metricValue(t, s.scrape(t), "nxdns_panics_total"); v != float64(i+1) {
			t.Errorf("%s: nxdns_panics_total = %v, want %d", proto, v, i+1)
		}
		if r := ask(t, proto, s.addr(proto), wiretest.Query("next.example.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Errorf("%s: the next query: %s with %d records, want NOERROR", proto, dns.RcodeToString[r.Rcode], len(r.Answer))
		}
	}
}

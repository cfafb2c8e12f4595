package clients

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/query/forward"
	"github.com/nxdnsd/nxdnsd/wire/transport"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// A client is named by PTR through a forward zone's resolver, a real UDP
// server on loopback; an address no zone covers is asked of nobody.
func TestZoneLookupNamesClient(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		if q.Question[0].Qtype == dns.TypePTR && q.Question[0].Name == "77.1.168.192.in-addr.arpa." {
			rr, _ := dns.NewRR("77.1.168.192.in-addr.arpa. 60 IN PTR laptop.lan.")
			m.Answer = []dns.RR{rr}
		} else {
			m.Rcode = dns.RcodeNameError
		}
		w.WriteMsg(m)
	})
	fwd := forward.New(srv.Addr, 2*time.Second)
	defer fwd.Close()
	zone := func(name string) transport.Exchanger {
		if strings.HasSuffix(name, ".168.192.in-addr.arpa.") {
			return fwd
		}
		return nil
	}
	lookup := ZoneLookup(zone)
	ctx := context.Background()
	if name, err := lookup(ctx, addr("192.168.1.77")); name != "laptop.lan." || err != nil {
		t.Fatalf("lookup = %q, %v", name, err)
	}
	if _, err := lookup(ctx, addr("192.168.1.78")); !errors.Is(err, ErrNoPTR) {
		t.Errorf("NXDOMAIN: %v", err)
	}
	if _, err := lookup(ctx, addr("10.0.0.1")); !errors.Is(err, ErrNoPTR) {
		t.Errorf("no zone: %v", err)
	}
	if n := srv.UDPQueries(); n != 2 {
		t.Errorf("the resolver got %d queries, want 2 (none for the address no zone covers)", n)
	}

	ch := newChanges()
	d := New(Config{ReverseLookup: true, OnChange: ch.OnChange}, lookup, nil)
	defer d.Close()
	d.Name(addr("192.168.1.77"))
	ch.waitFor(t, "the PTR name", func() bool { return d.Name(addr("192.168.1.77")) == "laptop.lan" })
}

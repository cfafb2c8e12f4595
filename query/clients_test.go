package query

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/clients"
	"github.com/nxdnsd/nxdnsd/rebind"
	"github.com/nxdnsd/nxdnsd/wire/server"
)

// namedClients is a directory of n static clients, testClient among them
// as "bench-client", closed when the test ends.
func namedClients(tb testing.TB, n int) *clients.Directory {
	tb.Helper()
	static := []clients.Static{{Name: "bench-client", Addrs: []netip.Addr{testClient.Addr()}}}
	for i := 1; i < n; i++ {
		static = append(static, clients.Static{
			Name:  fmt.Sprintf("host-%d", i),
			Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})},
		})
	}
	d := clients.New(clients.Config{Static: static}, nil, nil)
	tb.Cleanup(d.Close)
	return d
}

// The query's entry carries the directory's name of its client, and the
// listener's (a DoH path's) before it; a client it does not know has none.
func TestEntryClientName(t *testing.T) {
	t.Parallel()
	pool := answeringPool(t, "example.com. 300 IN A 192.0.2.1")
	h, rec := newTestHandler(t, HandlerConfig{Pool: pool, Clients: namedClients(t, 3)})
	raw := mustPack(t, newQuery("example.com.", dns.TypeA))
	for _, tt := range []struct {
		client netip.AddrPort
		own    string
		want   string
	}{
		{testClient, "", "bench-client"},
		{testClient, "pixel-7", "pixel-7"},
		{netip.MustParseAddrPort("[::ffff:10.0.0.2]:53"), "", "host-2"},
		{netip.MustParseAddrPort("192.0.2.99:53"), "", ""},
	} {
		h.ServeDNS(context.Background(), &server.Request{Raw: raw, Proto: ProtoUDP, Client: tt.client, ClientName: tt.own})
		if got := rec.last().ClientName; got != tt.want {
			t.Errorf("client %s (own name %q): name %q, want %q", tt.client, tt.own, got, tt.want)
		}
	}
}

// BenchmarkServeFastHitWith is BenchmarkServeFastHit with what spec
// section 15 adds to a hit: a directory of 10,000 named clients (the
// client among them), rebinding protection, both. Acceptance of issue 30:
// the hit's cost with the names unchanged within noise.
func BenchmarkServeFastHitWith(b *testing.B) {
	for _, bc := range []struct {
		name    string
		clients int
		rebind  bool
	}{
		{"names=10000", 10000, false},
		{"rebind", 0, true},
		{"names=10000+rebind", 10000, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := HandlerConfig{Cache: testCacheConfig(), Hooks: HooksFunc(func(*Entry) {})}
			cfg.Pool = answeringPool(b, "www.example.com. 300 IN A 192.0.2.1", "www.example.com. 300 IN A 192.0.2.2")
			if bc.clients > 0 {
				cfg.Clients = namedClients(b, bc.clients)
			}
			if bc.rebind {
				cfg.Rebind = rebind.New(true, nil)
			}
			h, err := NewHandler(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(h.Close)
			raw := mustPack(b, withEDNS(newQuery("www.example.com.", dns.TypeA), 1232, false))
			req := &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Answer: make([]byte, 0, 4096)}
			h.ServeFast(req)
			h.ServeDNS(context.Background(), &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Pending: req.Pending})
			b.ReportAllocs()
			for b.Loop() {
				req.Pending = nil
				if _, handled := h.ServeFast(req); !handled {
					b.Fatal("not a hit")
				}
			}
		})
	}
}

package actors

import (
	"context"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// BenchmarkPoolExchange measures the pool's own cost per query: an instant
// transport, two upstreams, queries from every core at once.
func BenchmarkPoolExchange(b *testing.B) {
	pool := benchPool(b, 1024, nil)
	b.RunParallel(func(pb *testing.PB) {
		q := packed(b, query())
		var trail [4]Attempt
		ctx := context.Background()
		for pb.Next() {
			if r := pool.Exchange(ctx, q, time.Now(), trail[:0]); r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	})
}

// BenchmarkPoolExchangeWaiting is BenchmarkPoolExchange for one client
// whose queries outnumber the slots, as under dnsperf's load: most of
// them wait for a slot, and the client's share is weighed and counted on
// every one (share.go, wait.go).
func BenchmarkPoolExchangeWaiting(b *testing.B) {
	pool := benchPool(b, 2, runtime.Gosched) // an exchange that yields, so that the slot is held a while
	client := netip.MustParseAddr("127.0.0.1")
	// Every query under one cancellable context, the listener's (server.go).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		q := packed(b, query())
		q.Client = client
		var trail [4]Attempt
		for pb.Next() {
			if r := pool.Exchange(ctx, q, time.Now(), trail[:0]); r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	})
}

// benchPool is a pool of two upstreams of slots each whose transport
// answers at once, after calling during (if not nil), closed when b ends.
func benchPool(b *testing.B, slots int, during func()) *Pool {
	reply := query()
	reply.Response = true
	instant := transport.ExchangerFunc(func(context.Context, *transport.Query, time.Time) (transport.Answer, error) {
		if during != nil {
			during()
		}
		return transport.Answer{Msg: reply}, nil
	})
	pool, err := NewPool(defaults, []Spec{
		{Name: "a", Slots: slots, Transport: instant},
		{Name: "b", Slots: slots, Transport: instant},
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	b.ReportAllocs()
	return pool
}

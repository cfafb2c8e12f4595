package actors

import (
	"context"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// BenchmarkPoolExchange measures the pool's own cost per query: an instant
// transport, two upstreams, queries from every core at once.
func BenchmarkPoolExchange(b *testing.B) {
	reply := query()
	reply.Response = true
	instant := transport.ExchangerFunc(func(context.Context, *transport.Query, time.Time) (transport.Answer, error) {
		return transport.Answer{Msg: reply}, nil
	})
	pool, err := NewPool(defaults, []Spec{
		{Name: "a", Slots: 1024, Transport: instant},
		{Name: "b", Slots: 1024, Transport: instant},
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	b.ReportAllocs()
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

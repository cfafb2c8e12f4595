package transport

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// The transports side by side over loopback, against fakes that answer at
// once: what each costs per query beyond the network. "serial" is one query
// after another, its ns/op the latency; "parallel" keeps GOMAXPROCS×8
// queries in flight, and its queries/s is the throughput. allocs/op counts
// the whole process, the fake server's side included.

// parallelism is the queries in flight per GOMAXPROCS in the parallel
// benchmarks: a busy forwarder's dozens, more than a pool's slots.
const parallelism = 8

func BenchmarkDoTExchange(b *testing.B) {
	_, tr := newDoT(b, wiretest.Answer())
	benchExchange(b, tr)
}

func BenchmarkDoHExchange(b *testing.B) {
	_, tr := newDoH(b, wiretest.Answer())
	benchExchange(b, tr)
}

// BenchmarkUDPExchangeParallel is the UDP exchange, serial and parallel,
// for comparison with the encrypted transports.
func BenchmarkUDPExchangeParallel(b *testing.B) {
	srv := wiretest.NewServer(b, wiretest.Answer())
	benchExchange(b, newTestUDP(b, srv.Addr))
}

// benchExchange runs the serial and parallel cases through tr. The first
// exchange, which dials, happens before the clock starts.
func benchExchange(b *testing.B, tr Exchanger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := exchangeMsg(ctx, tr, query("warm.example")); err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		q := query("bench.example")
		b.ReportAllocs()
		start := time.Now()
		for b.Loop() {
			if _, err := exchangeMsg(ctx, tr, q); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "queries/s")
	})
	b.Run("parallel", func(b *testing.B) {
		var n atomic.Int64
		b.SetParallelism(parallelism)
		b.ReportAllocs()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			// Each goroutine its own message: packing one writes its OPT
			// record, so messages are not shared between goroutines.
			q := query(fmt.Sprintf("bench%d.example", n.Add(1)))
			for pb.Next() {
				if _, err := exchangeMsg(ctx, tr, q); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "queries/s")
	})
}

// BenchmarkExchangeRaw is the byte path of the transports that have one
// (a Query with an answer buffer, packed once), 8×GOMAXPROCS queries in
// flight, side by side with their message path (exchangeMsg: packed per
// exchange, no buffer, the answer parsed). The expiry bounds each exchange
// and the context has no deadline, as the pool's attempts have it.
func BenchmarkExchangeRaw(b *testing.B) {
	for _, tr := range rawTransports {
		x := tr.new(b, wiretest.Answer())
		ctx, cancel := context.WithCancel(context.Background())
		expiry := time.Now().Add(time.Minute)
		if _, err := x.Exchange(ctx, mustQuery(b, query("warm.example")), expiry); err != nil {
			b.Fatal(err)
		}
		for _, raw := range []bool{false, true} {
			name := tr.name + "/msg"
			if raw {
				name = tr.name + "/raw"
			}
			b.Run(name, func(b *testing.B) {
				var n atomic.Int64
				b.SetParallelism(parallelism)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					q := query(fmt.Sprintf("bench%d.example", n.Add(1)))
					wq := wireQuery(b, q, 4096)
					mctx, mcancel := context.WithDeadline(ctx, expiry)
					defer mcancel()
					for pb.Next() {
						var err error
						if raw {
							_, err = x.Exchange(ctx, wq, expiry)
						} else {
							_, err = exchangeMsg(mctx, x, q)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
		cancel()
	}
}

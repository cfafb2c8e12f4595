package actors

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/nxdnsd/nxdnsd/wire/transport"
	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

// chaotic decides each exchange's fate from the query's ID and the
// upstream, so that concurrent exchanges need no shared random source.
func chaotic(upstream int, seed uint64) func(context.Context, *dns.Msg) (*dns.Msg, error) {
	return func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
		r := rand.New(rand.NewPCG(seed, uint64(m.Id)<<8|uint64(upstream)))
		delay := time.Duration(r.IntN(3000)) * time.Microsecond
		switch r.IntN(7) {
		case 0, 1:
			return answering(ctx, m)
		case 2:
			return after(delay, answering)(ctx, m)
		case 3:
			return stalling(ctx, m)
		case 4:
			return after(delay, refusing)(ctx, m)
		case 5:
			return nil, syscall.EMFILE
		default:
			return nil, ErrBudgetExhausted
		}
	}
}

// Permits are conserved whatever happens: stalls, failures, cancellations,
// deadlines, waits, probes. Afterwards no slot is held and no goroutine
// is left.
func TestPermitConservation(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rapid.Check(t, func(rt *rapid.T) {
		attempt := time.Duration(rapid.IntRange(1, 8).Draw(rt, "attempt_ms")) * time.Millisecond
		policy := Policy{
			AttemptTimeout: attempt,
			TotalTimeout:   attempt + time.Duration(rapid.IntRange(0, 12).Draw(rt, "extra_ms"))*time.Millisecond,
			Health: HealthPolicy{
				FailureThreshold: rapid.IntRange(1, 3).Draw(rt, "threshold"),
				Backoff:          time.Duration(rapid.IntRange(1, 4).Draw(rt, "backoff_ms")) * time.Millisecond,
				BackoffMax:       8 * time.Millisecond,
				// Probes run beside the queries, on the same chaotic
				// upstreams; they must take no slot and leave nothing
				// running after Close.
				ProbeTimeout: time.Duration(rapid.IntRange(0, 4).Draw(rt, "probe_ms")) * time.Millisecond,
			},
		}
		seed := rapid.Uint64().Draw(rt, "seed")
		n := rapid.IntRange(1, 6).Draw(rt, "upstreams")
		specs := make([]Spec, n)
		for i := range specs {
			specs[i] = Spec{
				Name:      "u",
				Slots:     rapid.IntRange(1, 4).Draw(rt, "slots"),
				Transport: transport.MsgFunc(chaotic(i, seed)),
			}
		}
		pool, err := NewPool(policy, specs, nil)
		if err != nil {
			rt.Fatal(err)
		}
		defer pool.Close()

		queries := rapid.IntRange(20, 150).Draw(rt, "queries")
		// Queries come from a few clients, so that the client shares'
		// refusals and wake-ups run beside everything else.
		clients := rapid.IntRange(1, 3).Draw(rt, "clients")
		cancelEvery := rapid.IntRange(2, 10).Draw(rt, "cancel_every")
		var wg sync.WaitGroup
		var mu sync.Mutex
		var answered, failed int
		for q := range queries {
			wg.Go(func() {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if q%cancelEvery == 0 {
					stop := time.AfterFunc(time.Duration(q%5)*time.Millisecond, cancel)
					defer stop.Stop()
				}
				m := query()
				m.Id = uint16(q)
				q, err := transport.NewQuery(m)
				if err != nil {
					rt.Fatal(err)
				}
				q.Client = netip.AddrFrom4([4]byte{192, 0, 2, byte(int(m.Id) % clients)})
				r := pool.Exchange(ctx, q, time.Now(), nil)
				mu.Lock()
				defer mu.Unlock()
				if r.Err == nil {
					answered++
					if r.Msg == nil || r.Upstream == "" {
						rt.Errorf("answer without message or attribution: %+v", r)
					}
					return
				}
				failed++
				if errors.Is(r.Err, ErrShareRefused) && clients == 1 {
					rt.Errorf("a lone client refused for its share")
				}
				if !errors.Is(r.Err, ErrBudgetExhausted) && !errors.Is(r.Err, ErrAllFailed) &&
					!errors.Is(r.Err, context.Canceled) && !errors.Is(r.Err, syscall.EMFILE) &&
					!errors.Is(r.Err, ErrShareRefused) {
					rt.Errorf("unexpected error %v", r.Err)
				}
			})
		}
		wg.Wait()
		pool.sync()
		for i, u := range pool.upstreams {
			if held := len(u.slots); held != 0 {
				rt.Errorf("u%d: %d permits still held", i, held)
			}
		}
		if held, waiting, lone := sharesAtRest(pool); held != 0 || waiting != 0 || lone != 0 {
			rt.Errorf("client shares at rest: %d slots held, %d waiting, %d lone waiters", held, waiting, lone)
		}
		if answered+failed != queries {
			rt.Errorf("%d answered + %d failed != %d queries", answered, failed, queries)
		}
	})
}

package actors

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
)

// Two clients of the tests: A asks for slowName, B for fastName.
var (
	clientA = netip.MustParseAddr("192.0.2.1")
	clientB = netip.MustParseAddr("192.0.2.2")
)

const (
	slowName = "slow.example."
	fastName = "fast.example."
)

// byName serves slowName with slow and every other name with fast.
func byName(slow, fast func(context.Context, *dns.Msg) (*dns.Msg, error)) func(context.Context, *dns.Msg) (*dns.Msg, error) {
	return func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
		if m.Question[0].Name == slowName {
			return slow(ctx, m)
		}
		return fast(ctx, m)
	}
}

// ask starts a query for name from client and returns where its result
// will be.
func ask(t *testing.T, pool *Pool, client netip.Addr, name string) <-chan Result {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	q := packed(t, m)
	q.Client = client
	done := make(chan Result, 1)
	go func() { done <- pool.Exchange(t.Context(), q, time.Now(), nil) }()
	return done
}

// results returns the results that are in, without waiting.
func results(chs ...<-chan Result) (in []Result) {
	for _, ch := range chs {
		select {
		case r := <-ch:
			in = append(in, r)
		default:
		}
	}
	return in
}

// releaseAll lets n gated exchanges answer.
func releaseAll(gate chan<- error, n int) {
	for range n {
		gate <- nil
	}
}

// Issue 25, item 2: client A's slow names hold every slot and more of its
// queries wait; client B's query then waits too, A's waiters — over A's
// share now that B is here — are refused, and the first slot A frees goes
// to B, not to A's next query. Before client shares, B queued behind A's
// waiters and the freed slot went to the first of them.
func TestSlowClientDoesNotStallAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan error)
		pool, fakes := newTestPool(t, defaults, up{slots: 4, fn: byName(gated(gate), answering)})
		var as []<-chan Result
		for range 6 {
			as = append(as, ask(t, pool, clientA, slowName))
		}
		synctest.Wait()
		if calls, queued := fakes[0].calls.Load(), pool.QueuedTotal(); calls != 4 || queued != 2 {
			t.Fatalf("A alone: %d exchanges, %d waiting; want every slot used (4) and 2 waiting", calls, queued)
		}

		b := ask(t, pool, clientB, fastName)
		synctest.Wait()
		refused := results(as...)
		if len(refused) != 2 {
			t.Fatalf("once B waits, %d of A's queries ended, want its 2 waiters refused", len(refused))
		}
		for _, r := range refused {
			if r.Err != ErrShareRefused || len(r.Attempts) != 0 {
				t.Errorf("A's waiter: err %v after %d attempts, want ErrShareRefused before any", r.Err, len(r.Attempts))
			}
		}

		gate <- nil // one of A's exchanges ends
		synctest.Wait()
		select {
		case r := <-b:
			if r.Err != nil || r.Upstream != "u0" {
				t.Errorf("B: err %v upstream %q, want an answer from u0", r.Err, r.Upstream)
			}
		default:
			t.Fatal("B still waits after A freed a slot: the slot went to another of A's queries")
		}
		releaseAll(gate, 3)
		synctest.Wait()
		answered := results(as...)
		if len(answered) != 4 {
			t.Errorf("%d of A's 4 held queries ended once released", len(answered))
		}
		for _, r := range answered {
			if r.Err != nil {
				t.Errorf("A's held query: %v, want an answer", r.Err)
			}
		}
		if got := pool.ShareRefusedTotal(); got != 2 {
			t.Errorf("share refused total %d, want 2", got)
		}
		if got := pool.BudgetExhaustedTotal(); got != 0 {
			t.Errorf("budget exhausted total %d, want 0: a share refusal is not the budget's", got)
		}
		pool.sync()
		if st := pool.Status()[0]; st.Failures != 0 || st.InFlight != 0 || st.InBackoff {
			t.Errorf("upstream after the refusals: %+v, want no failure recorded and every slot back", st)
		}
	})
}

// While B is active, A, over its share, leaves a reserve of free slots
// (two for one other client) and is refused rather than waiting, so that
// B's next query takes a slot at once; once B has been quiet for two
// epochs, A is alone again and uses every slot. Before client shares, A
// took all 16 slots and B's query waited for one of A's to end.
func TestShareKeepsAReserveForAnActiveClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan error)
		// A's exchanges outlive the test's fake seconds: nothing expires.
		long := Policy{AttemptTimeout: time.Minute, TotalTimeout: time.Minute, Health: defaults.Health}
		pool, fakes := newTestPool(t, long, up{slots: 16, fn: byName(gated(gate), answering)})
		if r := <-ask(t, pool, clientB, fastName); r.Err != nil {
			t.Fatal(r.Err)
		}
		var as []<-chan Result
		for range 16 {
			// One at a time: the rule reads counters without a lock, so
			// queries deciding at the same instant may overrun the reserve
			// by one or two (an approximation by design).
			as = append(as, ask(t, pool, clientA, slowName))
			synctest.Wait()
		}
		if refused := results(as...); len(refused) != 2 || refused[0].Err != ErrShareRefused || refused[1].Err != ErrShareRefused {
			t.Fatalf("A's 16 queries beside B: %d ended at once (%v), want 2 refused", len(refused), refused)
		}
		if calls, queued := fakes[0].calls.Load(), pool.QueuedTotal(); calls != 1+14 || queued != 0 {
			t.Fatalf("%d exchanges and %d waits, want B's and 14 of A's, and nobody waiting", calls, queued)
		}

		b := ask(t, pool, clientB, fastName)
		synctest.Wait()
		select {
		case r := <-b:
			if r.Err != nil || r.Queued != 0 {
				t.Errorf("B beside A: err %v, waited %v; want an answer without a wait", r.Err, r.Queued)
			}
		default:
			t.Fatal("B waits while A holds its share and more")
		}

		time.Sleep(3 * time.Second) // fake time: two epochs without B
		more := []<-chan Result{ask(t, pool, clientA, slowName), ask(t, pool, clientA, slowName)}
		synctest.Wait()
		if in := results(more...); len(in) != 0 || fakes[0].calls.Load() != 2+16 {
			t.Errorf("A alone again: %d of 2 more queries ended (%v), %d exchanges; want both holding the reserve's slots",
				len(in), in, fakes[0].calls.Load())
		}
		releaseAll(gate, 16)
		synctest.Wait()
		if got := pool.ShareRefusedTotal(); got != 2 {
			t.Errorf("share refused total %d, want 2", got)
		}
	})
}

// A client alone uses every slot and waits for more, as without shares:
// nothing refused (dnsperf in `task bench`, a router that NATs its LAN).
func TestLoneClientUsesEverySlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan error)
		pool, fakes := newTestPool(t, defaults, up{slots: 4, fn: byName(gated(gate), answering)})
		var as []<-chan Result
		for range 6 {
			as = append(as, ask(t, pool, clientA, slowName))
		}
		synctest.Wait()
		if calls, queued := fakes[0].calls.Load(), pool.QueuedTotal(); calls != 4 || queued != 2 {
			t.Fatalf("%d exchanges, %d waiting; want 4 and 2", calls, queued)
		}
		releaseAll(gate, 6)
		for _, ch := range as {
			if r := <-ch; r.Err != nil {
				t.Errorf("lone client's query: %v, want an answer", r.Err)
			}
		}
		if got := pool.ShareRefusedTotal(); got != 0 {
			t.Errorf("share refused total %d, want 0", got)
		}
	})
}

// Queries of nxdnsd's own (a cache refresh: no client address) are no
// client: beside them a client alone still uses every slot and waits,
// nothing is refused, and they wait like anyone. Counted as a client, a
// refresh would have cost a lone client (a router NATing its LAN) the
// reserve and its waits.
func TestOwnQueriesAreNoClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan error)
		pool, fakes := newTestPool(t, defaults, up{slots: 4, fn: byName(gated(gate), answering)})
		var as []<-chan Result
		for range 6 {
			as = append(as, ask(t, pool, clientA, slowName))
		}
		synctest.Wait()
		own := ask(t, pool, netip.Addr{}, fastName)
		synctest.Wait()
		if in := results(as...); len(in) != 0 {
			t.Fatalf("beside a query of nxdnsd's own, %d of A's queries ended (%v), want 4 holding and 2 waiting", len(in), in)
		}
		if calls, queued := fakes[0].calls.Load(), pool.QueuedTotal(); calls != 4 || queued != 3 {
			t.Fatalf("%d exchanges, %d waits; want A's 4, and A's 2 and the refresh waiting", calls, queued)
		}
		releaseAll(gate, 6)
		synctest.Wait()
		if r := <-own; r.Err != nil {
			t.Errorf("own query: %v", r.Err)
		}
		if got := pool.ShareRefusedTotal(); got != 0 {
			t.Errorf("share refused total %d, want 0", got)
		}
		if c := pool.shares.client(netip.Addr{}); c.epoch.Load() != 0 || c.counts.Load() != 0 {
			t.Error("the query of nxdnsd's own was counted as a client")
		}
	})
}

// A lone waiter that a kick finds below its share goes on waiting, no
// longer lone, and takes the next slot; every share counter is back at
// zero once all is answered. nxdnsd's own queries (a refresh: no client)
// hold three of the four slots, so that A, holding one and waiting for
// another, is below its share of two once B comes.
func TestKickedWaiterBelowItsShareWaitsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan error)
		pool, _ := newTestPool(t, defaults, up{slots: 4, fn: byName(gated(gate), gated(gate))})
		var all []<-chan Result
		for range 3 {
			all = append(all, ask(t, pool, netip.Addr{}, slowName))
		}
		synctest.Wait()
		a1 := ask(t, pool, clientA, slowName)
		synctest.Wait()
		a2 := ask(t, pool, clientA, slowName) // waits, alone
		synctest.Wait()
		// sharesAtRest counts a waiter twice: its client's and the pool's.
		if _, waiting, lone := sharesAtRest(pool); waiting != 2 || lone != 1 {
			t.Fatalf("A's second query: %d waiting (counted twice), %d lone; want 2 and 1", waiting, lone)
		}
		b := ask(t, pool, clientB, fastName) // waits too, and kicks A's
		synctest.Wait()
		if in := results(a2); len(in) != 0 {
			t.Fatalf("A's waiter, below its share, ended at the kick: %+v", in[0])
		}
		if held, waiting, lone := sharesAtRest(pool); held != 1 || waiting != 4 || lone != 0 {
			t.Fatalf("after the kick: %d held, %d waiting (counted twice), %d lone; want A's 1, A's and B's waiting (4), none lone", held, waiting, lone)
		}
		all = append(all, a1, a2, b)
		releaseAll(gate, 6)
		synctest.Wait()
		for i, r := range results(all...) {
			if r.Err != nil {
				t.Errorf("query %d: %v", i, r.Err)
			}
		}
		if got := len(results(all...)); got != 0 {
			t.Errorf("%d results left over", got)
		}
		if held, waiting, lone := sharesAtRest(pool); held != 0 || waiting != 0 || lone != 0 {
			t.Errorf("at rest: %d held, %d waiting, %d lone; want all zero", held, waiting, lone)
		}
	})
}

// sharesAtRest reports what a pool's share counters still count once
// every query has returned: every one must be zero.
func sharesAtRest(pool *Pool) (held, waiting, lone int) {
	s := pool.shares
	for i := range s.table {
		h, w := s.table[i].load()
		held += h
		waiting += w
	}
	v := s.waits.Load()
	return held, waiting + waitingOf(v), loneOf(v)
}

// The pool counts clients as the listener does (wire/server/server_fair.go):
// every address, IPv6 included, is a client; the addresses of one /64 are
// not one client. Eight of them in one bucket by chance: odds of 1 in
// 4,096^7.
func TestShareClientIsAnAddress(t *testing.T) {
	t.Parallel()
	s := newShares()
	a := netip.MustParseAddr("fd00:1:2:3::1")
	if s.client(a) != s.client(netip.MustParseAddr("fd00:1:2:3::1")) {
		t.Fatal("one address in two buckets")
	}
	buckets := map[*clientShare]bool{}
	for i := range 8 {
		b := a.As16()
		b[15] = byte(i + 1)
		buckets[s.client(netip.AddrFrom16(b))] = true
	}
	if len(buckets) < 2 {
		t.Error("eight addresses of one IPv6 /64 share one bucket")
	}
	// A LAN's addresses spread over the table: 256 keys thrown at random
	// into 4,096 buckets fill about 248; fewer than 200 is a broken hash.
	lan := map[*clientShare]bool{}
	for i := range 256 {
		lan[s.client(netip.AddrFrom4([4]byte{192, 168, 1, byte(i)}))] = true
	}
	if len(lan) < 200 {
		t.Errorf("256 addresses of one /24 in %d buckets", len(lan))
	}
}

// askUnder is ask under ctx.
func askUnder(t *testing.T, ctx context.Context, pool *Pool, client netip.Addr, name string) <-chan Result {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	q := packed(t, m)
	q.Client = client
	done := make(chan Result, 1)
	go func() { done <- pool.Exchange(ctx, q, time.Now(), nil) }()
	return done
}

// A client's query waits for a slot on the kick channel alone when its
// context is the one the pool adopted (share.go, adopt), the first a
// client's query waited under: that context's end must still end the
// wait, with its error, as must the end of a context the pool did not
// adopt, on which the wait selects itself. Once the pool has closed, the
// adopted context's end wakes nothing.
func TestSlotWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan error)
		pool, _ := newTestPool(t, defaults, up{slots: 1, fn: gated(gate)})
		listener, endListener := context.WithCancel(t.Context())
		other, endOther := context.WithCancel(t.Context())
		defer endOther()
		held := askUnder(t, t.Context(), pool, clientA, slowName)
		synctest.Wait()
		adopted := askUnder(t, listener, pool, clientA, slowName) // the first to wait
		synctest.Wait()
		notAdopted := askUnder(t, other, pool, clientA, slowName)
		synctest.Wait()
		if a := pool.shares.adopted.Load(); a == nil || a.done != listener.Done() {
			t.Fatalf("adopted %+v, want the first waiter's context", a)
		}
		if in := results(adopted, notAdopted); len(in) != 0 {
			t.Fatalf("%d waiters ended before any context did: %+v", len(in), in)
		}

		endListener()
		synctest.Wait()
		select {
		case r := <-adopted:
			if !errors.Is(r.Err, context.Canceled) || len(r.Attempts) != 0 {
				t.Errorf("the adopted context's waiter: err %v after %d attempts, want context.Canceled before any", r.Err, len(r.Attempts))
			}
		default:
			t.Fatal("the adopted context ended and its waiter still waits")
		}
		if in := results(notAdopted); len(in) != 0 {
			t.Fatalf("another context's waiter ended with the adopted one's: %+v", in[0])
		}

		endOther()
		synctest.Wait()
		select {
		case r := <-notAdopted:
			if !errors.Is(r.Err, context.Canceled) {
				t.Errorf("the other context's waiter: err %v, want context.Canceled", r.Err)
			}
		default:
			t.Fatal("the other context ended and its waiter still waits")
		}

		gate <- nil
		synctest.Wait()
		if r := <-held; r.Err != nil {
			t.Errorf("the query holding the slot: %v", r.Err)
		}
		if held, waiting, lone := sharesAtRest(pool); held != 0 || waiting != 0 || lone != 0 {
			t.Errorf("at rest: %d held, %d waiting, %d lone; want all zero", held, waiting, lone)
		}
		if got := pool.QueuedTotal(); got != 2 {
			t.Errorf("queued total %d, want the 2 waits", got)
		}
		pool.Close()
		if a := pool.shares.adopted.Load(); a == nil || a.done != nil || a.stop != nil {
			t.Errorf("after Close adopted %+v, want an empty adoption", a)
		}
	})
}

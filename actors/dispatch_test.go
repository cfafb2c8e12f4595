package actors

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// The decisive regression of the design note: a primary that stalls its
// whole attempt at the shipped defaults leaves time for the standby.
func TestFastStandbyAtDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, _ := newTestPool(t, defaults, up{fn: stalling}, up{fn: answering})
		start := time.Now()
		r := exchange(t, pool, t.Context())
		if r.Err != nil || r.Msg == nil || r.Upstream != "u1" {
			t.Fatalf("got err=%v upstream=%q, want an answer from u1", r.Err, r.Upstream)
		}
		if got, want := outcomes(r), []string{"u0:expired", "u1:answer"}; !slices.Equal(got, want) {
			t.Errorf("trail %v, want %v", got, want)
		}
		if d := time.Since(start); d != defaults.AttemptTimeout {
			t.Errorf("took %v, want exactly one attempt budget %v", d, defaults.AttemptTimeout)
		}
		pool.sync()
		if st := pool.Status(); st[0].Failures != 1 || st[1].Successes != 1 {
			t.Errorf("health u0 failures=%d u1 successes=%d, want 1 and 1", st[0].Failures, st[1].Successes)
		}
	})
}

// holdSlots starts n exchanges that hold slots of the pool until gate
// gets a value each, and waits until they all hold theirs.
func holdSlots(t *testing.T, pool *Pool, n int, wg *sync.WaitGroup) {
	t.Helper()
	for range n {
		wg.Go(func() { exchange(t, pool, t.Context()) })
	}
	synctest.Wait()
}

// A saturated primary defers to an idle standby instead of queueing.
// Mutation check: replacing the sweep's tryAcquire with a blocking wait on
// the highest-priority upstream makes this test fail.
func TestSaturatedPrimaryDefersToStandby(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan error)
		pool, fakes := newTestPool(t, defaults, up{slots: 2, fn: gated(gate)}, up{fn: answering})
		var wg sync.WaitGroup
		holdSlots(t, pool, 2, &wg)
		if n := fakes[0].calls.Load(); n != 2 {
			t.Fatalf("%d exchanges hold u0, want 2", n)
		}

		start := time.Now()
		r := exchange(t, pool, t.Context())
		if r.Err != nil || r.Upstream != "u1" {
			t.Fatalf("got err=%v upstream=%q, want an answer from u1", r.Err, r.Upstream)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("took %v, want no wait at all", d)
		}
		if q := pool.QueuedTotal(); q != 0 || r.Queued != 0 {
			t.Errorf("queued total %d, query queued %v: a non-blocking skip must not count", q, r.Queued)
		}
		gate <- nil
		gate <- nil
		wg.Wait()
	})
}

// A query waiting on two saturated upstreams is woken by whichever frees
// first, not only by the primary.
func TestWaitWakesOnAnyUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate0, gate1 := make(chan error), make(chan error)
		pool, _ := newTestPool(t, defaults, up{slots: 1, fn: gated(gate0)}, up{slots: 1, fn: after(0, answering)})
		var wg sync.WaitGroup
		holdSlots(t, pool, 1, &wg) // takes u0's slot
		// u1's only slot is held by a gated exchange of its own.
		pool.upstreams[1].transport = &fakeTransport{fn: gated(gate1)}
		holdSlots(t, pool, 1, &wg)

		done := make(chan Result, 1)
		go func() { done <- exchange(t, pool, t.Context()) }()
		synctest.Wait()
		pool.upstreams[1].transport = &fakeTransport{fn: answering}
		gate1 <- nil // u1 frees first
		r := <-done
		if r.Err != nil || r.Upstream != "u1" {
			t.Fatalf("got err=%v upstream=%q, want u1", r.Err, r.Upstream)
		}
		if pool.QueuedTotal() != 1 {
			t.Errorf("queued total %d, want 1", pool.QueuedTotal())
		}
		if in := pool.Status()[0].InFlight; in != 1 {
			t.Errorf("u0 in flight %d, want 1: it had not freed yet", in)
		}
		gate0 <- nil
		wg.Wait()
	})
}

// tight is a policy where the second attempt is truncated: attempt 2 s,
// total 3 s.
var tight = Policy{
	AttemptTimeout: 2 * time.Second,
	TotalTimeout:   3 * time.Second,
	Health:         HealthPolicy{FailureThreshold: 3, Backoff: time.Second, BackoffMax: 30 * time.Second, ProbeTimeout: time.Second},
}

func TestTruncatedExpiryIsCensored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, _ := newTestPool(t, tight, up{fn: stalling}, up{fn: stalling})
		start := time.Now()
		r := exchange(t, pool, t.Context())
		if !errors.Is(r.Err, ErrBudgetExhausted) {
			t.Fatalf("err %v, want budget exhausted", r.Err)
		}
		if r.Upstream != "u0" {
			t.Errorf("attributed to %q, want u0, the last recorded", r.Upstream)
		}
		if got, want := outcomes(r), []string{"u0:expired", "u1:censored"}; !slices.Equal(got, want) {
			t.Errorf("trail %v, want %v", got, want)
		}
		if d := time.Since(start); d != tight.TotalTimeout {
			t.Errorf("took %v, want the total budget %v", d, tight.TotalTimeout)
		}
		pool.sync()
		st := pool.Status()
		if st[1].Failures != 0 || st[1].Successes != 0 || st[1].LastError != nil {
			t.Errorf("u1 health changed by a censored attempt: %+v", st[1])
		}
		if st[0].Failures != 1 {
			t.Errorf("u0 failures %d, want 1", st[0].Failures)
		}
		if pool.BudgetExhaustedTotal() != 1 {
			t.Errorf("budget counter %d, want 1", pool.BudgetExhaustedTotal())
		}
	})
}

func TestTruncatedAttemptRefusedIsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, _ := newTestPool(t, tight, up{fn: stalling}, up{fn: after(100*time.Millisecond, refusing)})
		r := exchange(t, pool, t.Context())
		if !errors.Is(r.Err, ErrAllFailed) {
			t.Fatalf("err %v, want every upstream failed", r.Err)
		}
		if r.Upstream != "u1" {
			t.Errorf("attributed to %q, want u1", r.Upstream)
		}
		pool.sync()
		st := pool.Status()
		if st[1].Failures != 1 || !errors.Is(st[1].LastError, syscall.ECONNREFUSED) {
			t.Errorf("u1 failures=%d last=%v, want 1 and connection refused", st[1].Failures, st[1].LastError)
		}
		if pool.BudgetExhaustedTotal() != 0 {
			t.Errorf("budget counter %d, want 0: every upstream failed before the deadline", pool.BudgetExhaustedTotal())
		}
	})
}

func TestQueueOnlyExhaustion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan error)
		pool, _ := newTestPool(t, defaults, up{slots: 1, fn: stubborn(gate)})
		var wg sync.WaitGroup
		holdSlots(t, pool, 1, &wg)
		r := exchange(t, pool, t.Context())
		if !errors.Is(r.Err, ErrBudgetExhausted) || r.Upstream != "" || len(r.Attempts) != 0 {
			t.Fatalf("got err=%v upstream=%q attempts=%v, want budget exhausted, none attributed, no attempt", r.Err, r.Upstream, r.Attempts)
		}
		if pool.QueuedTotal() != 1 || pool.QueuedSeconds() != defaults.TotalTimeout.Seconds() || r.Queued != defaults.TotalTimeout {
			t.Errorf("queued %d for %vs (query %v), want 1 for 5s", pool.QueuedTotal(), pool.QueuedSeconds(), r.Queued)
		}
		if pool.BudgetExhaustedTotal() != 1 {
			t.Errorf("budget counter %d, want 1", pool.BudgetExhaustedTotal())
		}
		gate <- nil
		wg.Wait()
	})
}

// quick is a policy whose breaker opens on the first failure.
var quick = Policy{
	AttemptTimeout: 2500 * time.Millisecond,
	TotalTimeout:   5000 * time.Millisecond,
	Health:         HealthPolicy{FailureThreshold: 1, Backoff: time.Second, BackoffMax: 4 * time.Second, ProbeTimeout: time.Second},
}

// noProbes is quick without health probes: pass two alone decides what
// happens to a backed-off upstream.
var noProbes = Policy{
	AttemptTimeout: quick.AttemptTimeout,
	TotalTimeout:   quick.TotalTimeout,
	Health:         HealthPolicy{FailureThreshold: 1, Backoff: time.Second, BackoffMax: 4 * time.Second},
}

// Pass two tries the upstreams skipped for backoff, in priority order,
// under the query's one deadline. Its answer heals an upstream; its
// failure is counted and leaves the backoff as it was. (Before issue 14 a
// failure in pass two re-armed the backoff doubled; only the actor's
// probes set the schedule now, and probe_test.go tests them.)
func TestPassTwoTriesBackedOffUpstreamsInOrderUnderTheSameDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, fakes := newTestPool(t, noProbes, up{fn: refusing}, up{fn: refusing}, up{fn: stalling})
		t0 := time.Now()
		// Open every breaker: u0 and u1 refuse at once, u2 stalls.
		r := exchange(t, pool, t.Context())
		if got, want := outcomes(r), []string{"u0:peer_fault", "u1:peer_fault", "u2:expired"}; !slices.Equal(got, want) {
			t.Fatalf("trail %v, want %v", got, want)
		}
		pool.sync()
		for i, st := range pool.Status() {
			if !st.InBackoff {
				t.Fatalf("u%d not in backoff", i)
			}
		}
		// u1 recovers; u2 would stall.
		fakes[1].fn = answering
		start := time.Now()
		r = exchange(t, pool, t.Context())
		if r.Err != nil || r.Upstream != "u1" {
			t.Fatalf("got err=%v upstream=%q, want u1 answering in pass two", r.Err, r.Upstream)
		}
		if got, want := outcomes(r), []string{"u0:peer_fault", "u1:answer"}; !slices.Equal(got, want) {
			t.Errorf("pass two %v, want %v", got, want)
		}
		if time.Since(start) != 0 {
			t.Errorf("pass two took %v, want no time", time.Since(start))
		}
		pool.sync()
		st := pool.Status()
		if st[1].InBackoff || !st[0].InBackoff {
			t.Errorf("u1 in backoff=%v (want healed by its answer), u0 in backoff=%v (want still)", st[1].InBackoff, st[0].InBackoff)
		}
		if st[0].Failures != 2 || !st[0].BackoffUntil.Equal(t0.Add(time.Second)) {
			t.Errorf("u0: %d failures, backoff until %v; want 2, and the backoff it had (1s), not re-armed", st[0].Failures, st[0].BackoffUntil.Sub(t0))
		}

		// With every upstream backed off and stalling, pass two still
		// ends at the one deadline.
		fakes[0].fn, fakes[1].fn = stalling, stalling
		pool.upstreams[1].record(message{outcome: OutcomeExpired, at: time.Now(), err: context.DeadlineExceeded})
		pool.sync()
		start = time.Now()
		r = exchange(t, pool, t.Context())
		if d := time.Since(start); d != quick.TotalTimeout {
			t.Errorf("pass two took %v, want the total budget", d)
		}
		// u1's attempt ends exactly at the deadline, a full one; u2 is
		// not attempted after it.
		if got, want := outcomes(r), []string{"u0:expired", "u1:expired"}; !slices.Equal(got, want) {
			t.Errorf("trail %v, want %v", got, want)
		}
		if !errors.Is(r.Err, ErrBudgetExhausted) || fakes[2].calls.Load() != 1 {
			t.Errorf("err %v, u2 called %d times; want budget exhausted, and only the first query", r.Err, fakes[2].calls.Load())
		}
	})
}

// No client query is the trial of an upstream whose backoff has ended: its
// actor probes it, and every client goes to the standby meanwhile. This
// replaces the half-open test of before issue 14, where exactly one client
// query was let through as the trial when the backoff ended: now none is.
// Mutation check: making the sweep attempt an upstream whose backoff has
// ended (the old HalfOpen case) sends queries to u0 and fails the count.
func TestNoClientIsTheTrial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, fakes := newTestPool(t, quick, up{fn: refusing}, up{fn: answering})
		synctest.Wait() // the start-up probes: answered
		if r := exchange(t, pool, t.Context()); r.Upstream != "u1" {
			t.Fatalf("first query: upstream %q", r.Upstream)
		}
		pool.sync()
		if !pool.Status()[0].InBackoff {
			t.Fatal("u0 not in backoff after a refusal at threshold 1")
		}

		gate := make(chan error)
		fakes[0].setProbe(gated(gate))
		time.Sleep(quick.Health.Backoff) // fake time: the backoff ends, the probe starts and waits on gate
		synctest.Wait()
		if n := fakes[0].probes.Load(); n != 2 {
			t.Fatalf("%d probes of u0, want the start-up probe and the one at the end of the backoff", n)
		}
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if r := exchange(t, pool, t.Context()); r.Err != nil || r.Upstream != "u1" {
					t.Errorf("got err=%v upstream=%q, want the standby's answer", r.Err, r.Upstream)
				}
			})
		}
		wg.Wait()
		if n := fakes[0].calls.Load(); n != 1 {
			t.Fatalf("%d client queries reached u0, want only the first", n)
		}
		gate <- errRefused // the probe fails
		synctest.Wait()
		st := pool.Status()[0]
		if !st.InBackoff || st.BackoffUntil.Sub(time.Now()) != 2*quick.Health.Backoff {
			t.Fatalf("after a failed probe: in backoff=%v for %v, want doubled to 2s", st.InBackoff, st.BackoffUntil.Sub(time.Now()))
		}

		fakes[0].fn = answering
		time.Sleep(2 * quick.Health.Backoff)
		synctest.Wait()
		gate <- nil // this probe answers
		synctest.Wait()
		if r := exchange(t, pool, t.Context()); r.Upstream != "u0" {
			t.Fatalf("after a probe's answer the query went to %q, want u0", r.Upstream)
		}
		pool.sync()
		if st := pool.Status()[0]; st.InBackoff || st.ConsecutiveFailures != 0 || fakes[0].calls.Load() != 2 {
			t.Errorf("after a successful probe: %+v, %d client queries; want healthy, 2", st, fakes[0].calls.Load())
		}
	})
}

func TestCancellationRecordsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, _ := newTestPool(t, defaults, up{fn: stalling}, up{fn: answering})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		r := exchange(t, pool, ctx)
		if !errors.Is(r.Err, context.Canceled) || r.Upstream != "" {
			t.Fatalf("got err=%v upstream=%q, want canceled with nobody attributed", r.Err, r.Upstream)
		}
		if got, want := outcomes(r), []string{"u0:canceled"}; !slices.Equal(got, want) {
			t.Errorf("trail %v, want %v", got, want)
		}
		pool.sync()
		for i, st := range pool.Status() {
			if st.Failures+st.Successes != 0 || st.InFlight != 0 {
				t.Errorf("u%d: %+v, want nothing recorded and the permit returned", i, st)
			}
		}
		if pool.BudgetExhaustedTotal() != 0 {
			t.Errorf("a cancellation moved the budget counter")
		}
	})
}

func TestNoAttemptAfterTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, fakes := newTestPool(t, defaults, up{fn: answering})
		u := pool.upstreams[0]
		if !u.tryAcquire() {
			t.Fatal("no slot")
		}
		now := time.Now()
		d := dispatch{pool: pool, ctx: t.Context(), q: packed(t, query()), deadline: now, now: now}
		p := permit{u: u, i: 0, slot: true}
		if over := d.attempt(&p); !over {
			t.Fatal("the query went on past its deadline")
		}
		if !errors.Is(d.res.Err, ErrBudgetExhausted) || d.res.Upstream != "" {
			t.Errorf("got err=%v upstream=%q", d.res.Err, d.res.Upstream)
		}
		if fakes[0].calls.Load() != 0 {
			t.Error("the transport was called after the deadline")
		}
		if len(u.slots) != 0 {
			t.Error("the slot was not returned")
		}
	})
}

// An upstream that entered backoff while the query waited for its slot
// gives the slot back, and the query moves on.
func TestPostAdmissionRecheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate0, gate1 := make(chan error), make(chan error)
		pool, fakes := newTestPool(t, quick, up{slots: 1, fn: gated(gate0)}, up{slots: 1, fn: gated(gate1)})
		var wg sync.WaitGroup
		holdSlots(t, pool, 2, &wg) // one on each upstream

		done := make(chan Result, 1)
		go func() { done <- exchange(t, pool, t.Context()) }()
		synctest.Wait()
		// u0 goes into backoff (as another query's failure would do) while
		// the query waits; then its holder ends with a local error, which
		// records nothing and frees the slot.
		pool.upstreams[0].record(message{outcome: OutcomePeerFault, at: time.Now(), err: errRefused})
		pool.sync()
		gate0 <- syscall.EMFILE
		synctest.Wait()
		gate1 <- nil // the holder of u1 answers; the waiting query takes u1
		gate1 <- nil // and is answered in turn
		r := <-done
		if r.Err != nil || r.Upstream != "u1" {
			t.Fatalf("got err=%v upstream=%q, want u1", r.Err, r.Upstream)
		}
		if got, want := outcomes(r), []string{"u1:answer"}; !slices.Equal(got, want) {
			t.Errorf("trail %v, want %v: u0 must not be attempted", got, want)
		}
		if n := fakes[0].calls.Load(); n != 1 {
			t.Errorf("u0 saw %d exchanges, want only its holder's", n)
		}
		wg.Wait()
		if st := pool.Status(); st[0].InFlight+st[1].InFlight != 0 {
			t.Errorf("permits held after the end: %+v", st)
		}
	})
}

func TestTwoStallingUpstreamsCostOneBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, fakes := newTestPool(t, defaults, up{fn: stalling}, up{fn: stalling}, up{fn: answering})
		start := time.Now()
		r := exchange(t, pool, t.Context())
		if d := time.Since(start); d != defaults.TotalTimeout {
			t.Errorf("took %v, want the one total budget %v", d, defaults.TotalTimeout)
		}
		if got, want := outcomes(r), []string{"u0:expired", "u1:expired"}; !slices.Equal(got, want) {
			t.Errorf("trail %v, want %v", got, want)
		}
		if !errors.Is(r.Err, ErrBudgetExhausted) || r.Upstream != "u1" {
			t.Errorf("got err=%v upstream=%q, want budget exhausted attributed to u1", r.Err, r.Upstream)
		}
		if fakes[2].calls.Load() != 0 {
			t.Error("u2 was attempted after the deadline")
		}
	})
}

// The deadline counts from the query's arrival when the caller read the
// clock then: a query that arrived 4 s ago has 1 s of the 5 s budget left.
func TestDeadlineCountsFromArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, _ := newTestPool(t, defaults, up{fn: stalling}, up{fn: answering})
		start := time.Now()
		r := pool.Exchange(t.Context(), packed(t, query()), start.Add(-4*time.Second), nil)
		if d := time.Since(start); d != time.Second {
			t.Errorf("took %v, want the 1s left of the budget", d)
		}
		if got, want := outcomes(r), []string{"u0:censored"}; !slices.Equal(got, want) {
			t.Errorf("trail %v, want %v", got, want)
		}
		if !errors.Is(r.Err, ErrBudgetExhausted) || r.Upstream != "" {
			t.Errorf("got err=%v upstream=%q, want budget exhausted with nobody attributed", r.Err, r.Upstream)
		}
	})
}

func TestBudgetCounterOncePerQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, _ := newTestPool(t, tight, up{fn: stalling}, up{fn: stalling})
		for i := 1; i <= 3; i++ {
			r := exchange(t, pool, t.Context())
			if !errors.Is(r.Err, ErrBudgetExhausted) {
				t.Fatalf("query %d: %v", i, r.Err)
			}
			if got := pool.BudgetExhaustedTotal(); got != uint64(i) {
				t.Fatalf("after %d exhausted queries the counter reads %d", i, got)
			}
		}
	})
}

// A transport that panics must not take the permit (or the trial) with it:
// the listener recovers the panic, and the upstream keeps all its slots.
func TestPanickingTransportReturnsThePermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, fakes := newTestPool(t, defaults, up{slots: 1, fn: func(context.Context, *dns.Msg) (*dns.Msg, error) {
			panic("transport bug")
		}})
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the panic did not reach the caller")
				}
			}()
			exchange(t, pool, t.Context())
		}()
		if in := pool.Status()[0].InFlight; in != 0 {
			t.Fatalf("%d permits held after the panic, want 0", in)
		}
		fakes[0].fn = answering
		if r := exchange(t, pool, t.Context()); r.Err != nil || r.Upstream != "u0" {
			t.Errorf("next query: err=%v upstream=%q, want an answer from the only upstream", r.Err, r.Upstream)
		}
	})
}

// A deadline of the caller's own is not a cancellation: the query ends with
// context.DeadlineExceeded, whether it ends in an attempt, in a slot wait
// or before the pool did anything, and nothing is recorded. The dispatch
// used to report every context error as context.Canceled.
func TestCallerDeadlineIsNotCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan error)
		pool, _ := newTestPool(t, defaults, up{slots: 1, fn: stalling}, up{slots: 1, fn: stubborn(gate)})

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		r := exchange(t, pool, ctx) // in u0's attempt
		if !errors.Is(r.Err, context.DeadlineExceeded) || errors.Is(r.Err, context.Canceled) {
			t.Errorf("in an attempt: err=%v, want context.DeadlineExceeded", r.Err)
		}
		if got, want := outcomes(r), []string{"u0:canceled"}; !slices.Equal(got, want) {
			t.Errorf("trail %v, want %v", got, want)
		}

		// Every slot held: the query waits, and its caller's deadline ends
		// the wait.
		pool.upstreams[0].slots <- struct{}{}
		var wg sync.WaitGroup
		wg.Go(func() { exchange(t, pool, t.Context()) })
		synctest.Wait()
		ctx, cancel = context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if r := exchange(t, pool, ctx); !errors.Is(r.Err, context.DeadlineExceeded) {
			t.Errorf("in a slot wait: err=%v, want context.DeadlineExceeded", r.Err)
		}
		<-pool.upstreams[0].slots
		gate <- nil
		wg.Wait()

		if r := exchange(t, pool, ctx); !errors.Is(r.Err, context.DeadlineExceeded) || len(r.Attempts) != 0 {
			t.Errorf("after the deadline: err=%v attempts=%d, want context.DeadlineExceeded and none", r.Err, len(r.Attempts))
		}
		pool.sync()
		if st := pool.Status(); st[0].Failures+st[1].Failures != 0 {
			t.Errorf("failures recorded: %+v", st)
		}
	})
}

// sleepyObserver sleeps in its first ObserveAttempt: a step of the query's
// own goroutine that takes time without blocking on anything of the pool's.
type sleepyObserver struct{ d time.Duration }

func (o *sleepyObserver) ObserveAttempt(int, Outcome, time.Duration) {
	time.Sleep(o.d)
	o.d = 0
}

// The clock is read again right before an attempt (spec section 4, step
// 5): when the query's deadline passed after the last reading, the next
// attempt does not start. The dispatch used to start it on the reading
// taken when the previous attempt ended: u1 was attempted 6 s into a 5 s
// budget, and this test failed.
func TestClockReadBeforeEachAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u0, u1 := &fakeTransport{fn: refusing}, &fakeTransport{fn: answering}
		pool, err := NewPool(defaults, []Spec{
			{Name: "u0", Slots: 1, Transport: u0},
			{Name: "u1", Slots: 1, Transport: u1},
		}, &sleepyObserver{d: defaults.TotalTimeout + time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		r := exchange(t, pool, t.Context())
		if !errors.Is(r.Err, ErrBudgetExhausted) {
			t.Errorf("err=%v, want budget exhausted", r.Err)
		}
		if n := u1.calls.Load(); n != 0 {
			t.Errorf("u1 was attempted %d times after the deadline", n)
		}
		if got, want := outcomes(r), []string{"u0:peer_fault"}; !slices.Equal(got, want) {
			t.Errorf("trail %v, want %v", got, want)
		}
	})
}

// The context a transport gets is one that context.AfterFunc,
// context.WithCancel and net.Dialer can watch without a goroutine each.
// The pool used to hand transports an attempt context of its own type,
// which the context package can only watch with a goroutine: 100
// AfterFunc calls on it started 100 goroutines, and this test failed.
func TestTransportContextNeedsNoGoroutines(t *testing.T) {
	const n = 100
	var grew int
	watching := transport.ExchangerFunc(func(ctx context.Context, q *transport.Query, expiry time.Time) (transport.Answer, error) {
		before := runtime.NumGoroutine()
		stops := make([]func() bool, 0, 2*n)
		for range n {
			stops = append(stops, context.AfterFunc(ctx, func() {}))
			c, cancel := context.WithCancel(ctx)
			stops = append(stops, func() bool { cancel(); return c.Err() != nil })
		}
		grew = runtime.NumGoroutine() - before
		for _, stop := range stops {
			stop()
		}
		return transport.MsgFunc(answering).Exchange(ctx, q, expiry)
	})
	// No probes: a probe calling watching at the same time would share
	// grew and the goroutine count.
	pool, err := NewPool(noProbes, []Spec{{Name: "u0", Slots: 1, Transport: watching}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithCancel(t.Context()) // as the listener's is
	defer cancel()
	if r := exchange(t, pool, ctx); r.Err != nil {
		t.Fatal(r.Err)
	}
	if grew >= n/2 {
		t.Errorf("%d watches of the transport's context started %d goroutines", 2*n, grew)
	}
}

// AllInBackoff is true exactly while every upstream is in backoff.
func TestAllInBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, _ := newTestPool(t, quick, up{fn: refusing}, up{fn: refusing})
		if pool.AllInBackoff() {
			t.Fatal("a fresh pool reads all in backoff")
		}
		for i, u := range pool.upstreams {
			for range quick.Health.FailureThreshold {
				u.record(message{outcome: OutcomePeerFault, at: time.Now(), err: errRefused})
			}
			pool.sync()
			if got, want := pool.AllInBackoff(), i == len(pool.upstreams)-1; got != want {
				t.Errorf("with u0..u%d in backoff: AllInBackoff %v, want %v", i, got, want)
			}
		}
	})
}

package actors

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
)

// secs returns durations of ss seconds each: the instants a test expects,
// exact under fake time.
func secs(ss ...float64) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = time.Duration(s * float64(time.Second))
	}
	return out
}

// noRoute is how net reports that this host has no route to the
// upstream: from connect, before anything is sent.
var noRoute = &net.OpError{Op: "dial", Net: "udp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ENETUNREACH}}

func unroutable(context.Context, *dns.Msg) (*dns.Msg, error) { return nil, noRoute }

// A dead primary costs clients nothing once its backoff has begun: in two
// minutes of queries every 250 ms (among them one at each instant a
// backoff ends, where a half-open trial used to be) none reaches it. Its
// actor probes it alone, at the end of each backoff, and each failed probe
// doubles the backoff up to the ceiling: probes start at 0 (start-up),
// 2, 5, 10, 19, 36, 67 and 98 s.
//
// Mutation check: letting the sweep attempt an upstream whose backoff has
// ended sends the queries at 2 s, 5 s, ... to u0, and the count fails.
func TestDeadPrimaryGetsOnlyProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		pool, fakes := newTestPool(t, defaults, up{fn: stalling, probe: stalling}, up{fn: answering})
		time.Sleep(defaults.Health.ProbeTimeout) // the start-up probe expires
		synctest.Wait()
		if st := pool.Status()[0]; !st.InBackoff || !st.BackoffUntil.Equal(t0.Add(2*time.Second)) {
			t.Fatalf("after the start-up probe: %+v, want backoff until 2s", st)
		}
		for time.Since(t0) < 120*time.Second {
			start := time.Now()
			r := exchange(t, pool, t.Context())
			if r.Err != nil || r.Upstream != "u1" || time.Since(start) != 0 {
				t.Fatalf("at %v: err=%v upstream=%q in %v, want u1's answer at once", start.Sub(t0), r.Err, r.Upstream, time.Since(start))
			}
			if got, want := outcomes(r), []string{"u1:answer"}; !slices.Equal(got, want) {
				t.Fatalf("at %v: trail %v, want %v", start.Sub(t0), got, want)
			}
			time.Sleep(250 * time.Millisecond)
		}
		if n := fakes[0].calls.Load(); n != 0 {
			t.Errorf("%d client queries reached the dead primary, want 0", n)
		}
		if got, want := fakes[0].started(t0), secs(0, 2, 5, 10, 19, 36, 67, 98); !slices.Equal(got, want) {
			t.Errorf("probes started at %v, want %v", got, want)
		}
		pool.sync()
		st := pool.Status()[0]
		if st.Probes[OutcomeExpired] != 8 || st.Successes+st.Failures != 0 || st.ConsecutiveFailures != 0 {
			t.Errorf("u0: %d expired probes, %d successes, %d failures, streak %d; want 8 probes, none counted as attempts",
				st.Probes[OutcomeExpired], st.Successes, st.Failures, st.ConsecutiveFailures)
		}
		if st.LastProbeOutcome != OutcomeExpired || !st.LastProbeAt.Equal(t0.Add(99*time.Second)) || !errors.Is(st.LastError, context.DeadlineExceeded) {
			t.Errorf("u0: last probe %v at %v, last error %v", st.LastProbeOutcome, st.LastProbeAt.Sub(t0), st.LastError)
		}
		if fakes[1].probes.Load() != 1 {
			t.Errorf("the healthy standby was probed %d times, want only at start-up", fakes[1].probes.Load())
		}
	})
}

// A failed start-up probe puts the upstream into backoff at once, before
// the first client query; a probe's answer heals it at the end of the
// backoff, to the nanosecond, and clients go back to it.
func TestProbeAnswerHeals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		pool, fakes := newTestPool(t, defaults, up{fn: refusing, probe: refusing}, up{fn: answering})
		synctest.Wait() // the start-up probes: u0's is refused at once
		if st := pool.Status()[0]; !st.InBackoff || !st.BackoffUntil.Equal(t0.Add(time.Second)) || st.Probes[OutcomePeerFault] != 1 {
			t.Fatalf("after a refused start-up probe: %+v, want backoff until 1s and the probe counted", st)
		}
		if r := exchange(t, pool, t.Context()); r.Upstream != "u1" || fakes[0].calls.Load() != 0 {
			t.Fatalf("first query: upstream %q, %d reached u0; want u1, none", r.Upstream, fakes[0].calls.Load())
		}

		fakes[0].fn = answering
		fakes[0].setProbe(answering)
		time.Sleep(time.Second - time.Nanosecond)
		if r := exchange(t, pool, t.Context()); r.Upstream != "u1" {
			t.Fatalf("a nanosecond before the probe: upstream %q, want u1", r.Upstream)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait() // the probe at 1s, answered
		if got, want := fakes[0].started(t0), secs(0, 1); !slices.Equal(got, want) {
			t.Errorf("probes started at %v, want %v", got, want)
		}
		if r := exchange(t, pool, t.Context()); r.Upstream != "u0" {
			t.Fatalf("after the probe's answer: upstream %q, want u0", r.Upstream)
		}
		pool.sync()
		st := pool.Status()[0]
		if st.InBackoff || st.Successes != 1 || st.Probes[OutcomeAnswer] != 1 || st.LastProbeOutcome != OutcomeAnswer || !st.LastProbeAt.Equal(t0.Add(time.Second)) {
			t.Errorf("u0 healed: %+v; want healthy, one client success, the probe's answer at 1s", st)
		}

		// No periodic probes of a healthy upstream.
		time.Sleep(time.Hour)
		if n := fakes[0].probes.Load() + fakes[1].probes.Load(); n != 3 {
			t.Errorf("%d probes after an hour of health, want the 3 of before", n)
		}
	})
}

// Start-up probes do not delay service: a query at start goes to the
// primary, which answers it at once while its probe is still out.
func TestStartupProbesDoNotDelayService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, fakes := newTestPool(t, defaults, up{fn: answering, probe: stalling}, up{fn: answering, probe: stalling})
		start := time.Now()
		if r := exchange(t, pool, t.Context()); r.Err != nil || r.Upstream != "u0" || time.Since(start) != 0 {
			t.Fatalf("err=%v upstream=%q after %v, want u0's answer at once", r.Err, r.Upstream, time.Since(start))
		}
		synctest.Wait()
		if fakes[0].probes.Load() != 1 || fakes[1].probes.Load() != 1 || time.Since(start) != 0 {
			t.Errorf("probes %d and %d, want one each, still out", fakes[0].probes.Load(), fakes[1].probes.Load())
		}
	})
}

// While every upstream is in backoff the probes keep the first backoff,
// so that service returns about backoff_ms after the network does; once
// one upstream is healthy again the others' backoffs double as usual.
func TestAllDownProbesKeepTheFirstBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		pool, fakes := newTestPool(t, defaults, up{fn: stalling, probe: stalling}, up{fn: stalling, probe: stalling})
		// Start-up probes expire at 1s: backoff until 2s. Every probe
		// then takes 1s and fails with both down: the next is 1s later.
		time.Sleep(19500 * time.Millisecond)
		want := secs(0, 2, 4, 6, 8, 10, 12, 14, 16, 18)
		for i, f := range fakes {
			if got := f.started(t0); !slices.Equal(got, want) {
				t.Errorf("u%d: probes started at %v, want %v", i, got, want)
			}
		}
		pool.sync()
		for i, st := range pool.Status() {
			if !st.InBackoff || st.BackoffUntil.Sub(st.LastProbeAt) != defaults.Health.Backoff {
				t.Errorf("u%d: backoff until %v after the last probe, want backoff_ms", i, st.BackoffUntil.Sub(st.LastProbeAt))
			}
		}

		// The network comes back for u0 at 19.5s: its probe at 20s heals
		// it, half a second later.
		fakes[0].setProbe(answering)
		fakes[0].fn = answering
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if pool.AllInBackoff() || pool.Status()[0].InBackoff {
			t.Fatal("u0 still in backoff after its probe's answer")
		}
		if r := exchange(t, pool, t.Context()); r.Upstream != "u0" || len(r.Attempts) != 1 {
			t.Fatalf("upstream %q, trail %v; want u0 in pass one", r.Upstream, outcomes(r))
		}
		// u1's probe at 20s fails at 21s with u0 healthy: 2s, next at 23s.
		time.Sleep(3500 * time.Millisecond)
		if got, want := fakes[1].started(t0), append(want, secs(20, 23)...); !slices.Equal(got, want) {
			t.Errorf("u1: probes started at %v, want %v", got, want)
		}
	})
}

// A local error records nothing, for attempts and probes alike: the query
// fails over without blaming the upstream; with no route anywhere it ends
// with the local error (EDE 23 for the client); a probe that finds no
// route leaves the backoff's length alone and comes again after
// backoff_ms.
func TestLocalErrorRecordsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		pool, fakes := newTestPool(t, defaults, up{fn: unroutable, probe: unroutable}, up{fn: answering})
		synctest.Wait()
		for range 2 * defaults.Health.FailureThreshold {
			r := exchange(t, pool, t.Context())
			if r.Err != nil || r.Upstream != "u1" {
				t.Fatalf("err=%v upstream=%q, want u1's answer after the failover", r.Err, r.Upstream)
			}
			if got, want := outcomes(r), []string{"u0:local_error", "u1:answer"}; !slices.Equal(got, want) {
				t.Fatalf("trail %v, want %v", got, want)
			}
		}
		pool.sync()
		st := pool.Status()[0]
		if st.InBackoff || st.Failures != 0 || st.ConsecutiveFailures != 0 || st.LastError != nil || st.Probes[OutcomeLocalError] != 1 {
			t.Fatalf("u0 after local errors: %+v; want healthy, nothing recorded, the start-up probe counted as local_error", st)
		}

		fakes[1].fn = unroutable
		r := exchange(t, pool, t.Context())
		if !errors.Is(r.Err, syscall.ENETUNREACH) || Classify(r.Err) != GroupLocalResource || r.Upstream != "" {
			t.Fatalf("no route anywhere: err=%v upstream=%q; want the local error, nobody attributed", r.Err, r.Upstream)
		}
		if got, want := outcomes(r), []string{"u0:local_error", "u1:local_error"}; !slices.Equal(got, want) {
			t.Errorf("trail %v, want %v", got, want)
		}

		// A resource error still ends the query (spec section 4's table).
		fakes[0].fn = func(context.Context, *dns.Msg) (*dns.Msg, error) { return nil, syscall.EMFILE }
		fakes[1].fn = answering
		if r := exchange(t, pool, t.Context()); !errors.Is(r.Err, syscall.EMFILE) || len(r.Attempts) != 1 {
			t.Errorf("EMFILE: err=%v trail %v, want EMFILE and no failover", r.Err, outcomes(r))
		}

		// u0 goes into backoff for a reason of its own (refusals), then
		// loses its route: probes every backoff_ms, its backoff length
		// kept, its last error still the refusal.
		fakes[0].fn = refusing
		for range defaults.Health.FailureThreshold {
			exchange(t, pool, t.Context())
		}
		pool.sync()
		if !pool.Status()[0].InBackoff || time.Since(t0) != 0 {
			t.Fatal("u0 not in backoff after three refusals")
		}
		time.Sleep(3500 * time.Millisecond)
		if got, want := fakes[0].started(t0), secs(0, 1, 2, 3); !slices.Equal(got, want) {
			t.Errorf("probes started at %v (the start-up probe, then every backoff_ms), want %v", got, want)
		}
		pool.sync()
		st = pool.Status()[0]
		if !st.InBackoff || st.Failures != 3 || !errors.Is(st.LastError, errRefused) || st.Probes[OutcomeLocalError] != 4 {
			t.Errorf("u0: %+v; want still in backoff, 3 failures, the refusal as last error, 4 local probe errors", st)
		}
		pool.upstreams[0].mu.Lock()
		length := pool.upstreams[0].health.Length
		pool.upstreams[0].mu.Unlock()
		if length != defaults.Health.Backoff {
			t.Errorf("backoff length %v, want %v: a probe without a route must not double it", length, defaults.Health.Backoff)
		}
	})
}

// A pass-two answer heals a backed-off upstream at once; a pass-two
// failure leaves the probe's schedule as it was.
func TestPassTwoAndProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		pool, fakes := newTestPool(t, defaults, up{fn: refusing, probe: refusing}, up{fn: refusing})
		synctest.Wait() // u0's start-up probe refused: backoff until 1s

		time.Sleep(500 * time.Millisecond)
		r := exchange(t, pool, t.Context())
		if got, want := outcomes(r), []string{"u1:peer_fault", "u0:peer_fault"}; !slices.Equal(got, want) {
			t.Fatalf("trail %v, want %v", got, want)
		}
		pool.sync()
		if st := pool.Status()[0]; !st.BackoffUntil.Equal(t0.Add(time.Second)) || st.Failures != 1 {
			t.Fatalf("u0 after a pass-two failure: %+v, want its backoff until 1s untouched, 1 failure", st)
		}
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if got, want := fakes[0].started(t0), secs(0, 1); !slices.Equal(got, want) {
			t.Errorf("probes at %v, want %v", got, want)
		}

		// u0's backoff is now 2s (until 3s). A pass-two answer at 1.5s
		// heals it then and there.
		time.Sleep(500 * time.Millisecond)
		fakes[0].fn = answering
		if r := exchange(t, pool, t.Context()); r.Err != nil || r.Upstream != "u0" {
			t.Fatalf("err=%v upstream=%q, want u0's answer in pass two", r.Err, r.Upstream)
		}
		pool.sync()
		if pool.Status()[0].InBackoff {
			t.Fatal("u0 still in backoff after a pass-two answer")
		}
		fakes[1].fn = answering
		if r := exchange(t, pool, t.Context()); r.Upstream != "u0" || len(r.Attempts) != 1 {
			t.Errorf("upstream %q, trail %v; want u0 in pass one", r.Upstream, outcomes(r))
		}
		time.Sleep(time.Minute)
		if n := fakes[0].probes.Load(); n != 2 {
			t.Errorf("%d probes of u0, want 2: none once healthy", n)
		}
	})
}

// Close during a probe cancels it and returns at once; nothing of the
// probe is recorded, and no goroutine is left (goleak, in TestMain).
func TestCloseDuringAProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, fakes := newTestPool(t, defaults, up{fn: answering, probe: stalling})
		time.Sleep(500 * time.Millisecond)
		start := time.Now()
		pool.Close()
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v during a probe, want no time", d)
		}
		if fakes[0].probes.Load() != 1 {
			t.Fatalf("%d probes, want the start-up probe", fakes[0].probes.Load())
		}
		if st := pool.Status()[0]; st.Probes != [numOutcomes]uint64{} || !st.LastProbeAt.IsZero() {
			t.Errorf("a cancelled probe was recorded: %+v", st)
		}
	})
}

// The smoothed RTT comes from answered attempts and probes (RFC 6298),
// and not from failures; there is none before the first answer.
func TestSmoothedRTT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
		pool, fakes := newTestPool(t, defaults, up{fn: after(ms(10), answering), probe: after(ms(40), answering)})
		synctest.Wait()
		if st := pool.Status()[0]; st.RTT.Samples != 0 {
			t.Fatalf("an estimate before any answer: %+v", st.RTT)
		}
		time.Sleep(ms(40)) // the start-up probe answers: the first sample
		synctest.Wait()
		exchange(t, pool, t.Context()) // 10 ms
		fakes[0].fn = after(ms(20), answering)
		exchange(t, pool, t.Context()) // 20 ms
		fakes[0].fn = after(ms(5), refusing)
		exchange(t, pool, t.Context()) // a failure: no sample
		pool.sync()
		want := RTT{SRTT: ms(34.21875), RTTVar: ms(20.9375), Samples: 3}
		if got := pool.Status()[0].RTT; got != want {
			t.Errorf("RTT %+v, want %+v", got, want)
		}
	})
}

// OnProbe hears every probe once its outcome is applied, with the state
// that follows from it.
func TestOnProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var heard []string
		p := defaults
		p.Health.OnProbe = func(name string, o Outcome, st Status) {
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, name+":"+o.String()+":"+map[bool]string{true: "backoff", false: "healthy"}[st.InBackoff])
		}
		pool, fakes := newTestPool(t, p, up{fn: answering, probe: refusing}, up{fn: answering})
		synctest.Wait()
		fakes[0].setProbe(answering)
		time.Sleep(time.Second)
		synctest.Wait()
		pool.Close()
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(heard)
		if want := []string{"u0:answer:healthy", "u0:peer_fault:backoff", "u1:answer:healthy"}; !slices.Equal(heard, want) {
			t.Errorf("heard %v, want %v", heard, want)
		}
	})
}

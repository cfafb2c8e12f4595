package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// loopFake is an upstream that may forward back to the nxdnsd asking it:
// while looping, every loop check it is sent arrives at that nxdnsd's
// query path (Loops.Seen, as the handler calls it) before it is answered,
// NXDOMAIN as under invalid.. A check that comes back late, after its
// answer, plays a forwarder that gave up on it before passing it on.
// Probes (". NS") and client queries are answered. It records when each
// check and each probe began, and counts client queries.
type loopFake struct {
	loops *Loops

	mu       sync.Mutex // guards following
	looping  bool
	servfail bool          // checks that do not come back are answered SERVFAIL
	late     time.Duration // > 0: a check comes back this long after its answer
	checks   []time.Time
	names    []string // each check's name, as sent
	probes   []time.Time
	clients  int
	seen     []LoopCheck // what Seen said of each check that came back
}

func (f *loopFake) setLooping(on bool, late time.Duration) {
	f.mu.Lock()
	f.looping, f.late = on, late
	f.mu.Unlock()
}

func (f *loopFake) Exchange(ctx context.Context, q *transport.Query, expiry time.Time) (transport.Answer, error) {
	name := q.Msg.Question[0].Name
	f.mu.Lock()
	looping, late, servfail := f.looping, f.late, f.servfail
	switch {
	case strings.HasSuffix(name, "."+LoopCheckZone):
		f.checks = append(f.checks, time.Now())
		f.names = append(f.names, name)
	case isProbe(q.Msg):
		f.probes = append(f.probes, time.Now())
	default:
		f.clients++
	}
	f.mu.Unlock()
	if strings.HasSuffix(name, "."+LoopCheckZone) && looping {
		back := func() {
			v := f.loops.Seen(dns.CanonicalName(name))
			f.mu.Lock()
			f.seen = append(f.seen, v)
			f.mu.Unlock()
		}
		if late > 0 {
			go func() { time.Sleep(late); back() }() // the fake's own delay, under fake time
		} else {
			back()
		}
	}
	return transport.MsgFunc(func(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
		r := new(dns.Msg)
		r.SetReply(m)
		if strings.HasSuffix(name, "."+LoopCheckZone) {
			r.Rcode = dns.RcodeNameError
			if servfail && !looping {
				r.Rcode = dns.RcodeServerFailure
			}
		}
		return r, nil
	}).Exchange(ctx, q, expiry)
}

// since returns ts relative to t0.
func since(t0 time.Time, ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(t0)
	}
	return out
}

func (f *loopFake) record() (checks, probes []time.Time, clients int, seen []LoopCheck) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.checks), slices.Clone(f.probes), f.clients, slices.Clone(f.seen)
}

// sent returns the name of every check the fake was sent, in order.
func (f *loopFake) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.names)
}

// relabel is a captured check's name with its upstream id and sequence
// (its second and third labels) replaced: what anyone who saw one check
// can write.
func relabel(name string, id, seq uint32) string {
	l := strings.Split(name, ".")
	l[1], l[2] = fmt.Sprintf("%08x", id), fmt.Sprintf("%08x", seq)
	return strings.Join(l, ".")
}

// loopHeard records OnLoop's calls as "name:loop" and "name:gone".
type loopHeard struct {
	mu    sync.Mutex
	calls []string
}

func (h *loopHeard) on(name string, looping bool, st Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
	what := "gone"
	if looping {
		what = "loop"
		if !st.Loop || !errors.Is(st.LastError, ErrLoop) {
			what = "loop without its status"
		}
	}
	h.calls = append(h.calls, name+":"+what)
}

func (h *loopHeard) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// newLoopPool builds a pool with loop checks over the given transports
// (u0, u1, …), one Loops shared by all, and closes it when the test ends.
func newLoopPool(tb testing.TB, loops *Loops, heard *loopHeard, ts ...transport.Exchanger) *Pool {
	tb.Helper()
	p := defaults
	p.Health.Loops, p.Health.OnLoop = loops, heard.on
	specs := make([]Spec, len(ts))
	for i, t := range ts {
		specs[i] = Spec{Name: "u" + string(rune('0'+i)), Address: "fake", Slots: 4, Transport: t}
	}
	pool, err := NewPool(p, specs, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// An upstream that loops is found by its start-up check, before its
// probe is sent, and is out of service at once: no client query reaches
// it, in either pass. It is checked again every backoff_max (30 s), each
// time with one check and no probe; OnLoop hears of the loop once. When a
// check no longer comes back, the probe behind it heals the upstream at
// that very instant, and OnLoop hears that once too.
//
// Mutation checks: sending the probe before the check sends a probe at 0
// and 30 s; treating Looping as BackedOff lets pass two reach u0 (a
// client query counted); calling OnLoop on every confirming check hears
// "u0:loop" three times.
func TestLoopFoundAtStartupAndGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		loops, heard := NewLoops(), &loopHeard{}
		f := &loopFake{loops: loops, looping: true}
		pool := newLoopPool(t, loops, heard, f)
		synctest.Wait()

		st := pool.Status()[0]
		if !st.Loop || !st.InBackoff || !errors.Is(st.LastError, ErrLoop) || !st.LastErrorAt.Equal(t0) || !st.BackoffUntil.Equal(t0.Add(30*time.Second)) {
			t.Fatalf("after the start-up check: %+v, want loop since 0, next check at 30s", st)
		}
		if e := pool.upstreams[0].eligibility(); e != Looping {
			t.Fatalf("eligibility %d, want Looping", e)
		}
		r := exchange(t, pool, t.Context())
		if !errors.Is(r.Err, ErrAllFailed) || len(r.Attempts) != 0 || r.Upstream != "" {
			t.Errorf("a client query: err %v, trail %v; want every upstream failed, none tried", r.Err, outcomes(r))
		}
		if !pool.AllInBackoff() {
			t.Error("AllInBackoff false with the only upstream looping")
		}

		time.Sleep(61 * time.Second) // two more checks, at 30 and 60 s, both come back
		synctest.Wait()
		f.setLooping(false, 0)
		time.Sleep(30 * time.Second) // the check at 90 s is answered and does not come back
		synctest.Wait()

		checks, probes, clients, seen := f.record()
		if want := secs(0, 30, 60, 90); !slices.Equal(since(t0, checks), want) {
			t.Errorf("checks at %v, want %v", since(t0, checks), want)
		}
		if want := secs(90); !slices.Equal(since(t0, probes), want) {
			t.Errorf("probes at %v, want %v: only behind a check that did not come back", since(t0, probes), want)
		}
		if clients != 0 {
			t.Errorf("%d client queries reached the looping upstream", clients)
		}
		if want := []LoopCheck{OwnLoopCheck, OwnLoopCheck, OwnLoopCheck}; !slices.Equal(seen, want) {
			t.Errorf("the query path saw the checks as %v, want %v", seen, want)
		}
		st = pool.Status()[0]
		if st.Loop || st.InBackoff || st.LastProbeOutcome != OutcomeAnswer || !st.LastProbeAt.Equal(t0.Add(90*time.Second)) {
			t.Errorf("after the check at 90 s: %+v, want healthy by the probe at 90 s", st)
		}
		if st.Probes[OutcomeAnswer] != 1 || st.Successes+st.Failures != 0 {
			t.Errorf("probes %v, attempts %d/%d: the checks are not probes, nothing counted as an attempt", st.Probes, st.Successes, st.Failures)
		}
		if got, want := heard.get(), []string{"u0:loop", "u0:gone"}; !slices.Equal(got, want) {
			t.Errorf("OnLoop heard %v, want %v", got, want)
		}
		if r := exchange(t, pool, t.Context()); r.Err != nil || r.Upstream != "u0" {
			t.Errorf("a client query after the loop: err %v upstream %q", r.Err, r.Upstream)
		}
	})
}

// A looping upstream is skipped by pass two as well, where an upstream
// merely in backoff would be tried when nothing else answered.
//
// Mutation check: skipping a Looping upstream like a BackedOff one puts
// "u0:answer" at the end of the trail.
func TestLoopingSkippedInBothPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loops, heard := NewLoops(), &loopHeard{}
		f := &loopFake{loops: loops, looping: true}
		refuse := transport.MsgFunc(refusing)
		pool := newLoopPool(t, loops, heard, f, refuse)
		synctest.Wait()
		r := exchange(t, pool, t.Context())
		if got, want := outcomes(r), []string{"u1:peer_fault"}; !slices.Equal(got, want) || !errors.Is(r.Err, ErrAllFailed) {
			t.Errorf("trail %v err %v, want %v and every upstream failed", got, r.Err, want)
		}
		if _, _, clients, _ := f.record(); clients != 0 {
			t.Errorf("%d client queries reached the looping upstream", clients)
		}
	})
}

// A check that comes back after its own exchange has ended (a forwarder
// on the loop gave up on it first, then passed it on) still finds the
// loop, at the instant it comes back. The probe that ran behind it in the
// meantime answered; it heals nothing.
func TestLoopFoundByALateCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		loops, heard := NewLoops(), &loopHeard{}
		f := &loopFake{loops: loops, looping: true, late: 100 * time.Millisecond}
		pool := newLoopPool(t, loops, heard, f)
		synctest.Wait()
		if st := pool.Status()[0]; st.Loop || st.InBackoff {
			t.Fatalf("before the check comes back: %+v, want healthy", st)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		st := pool.Status()[0]
		if !st.Loop || !st.LastErrorAt.Equal(t0.Add(100*time.Millisecond)) || !st.BackoffUntil.Equal(t0.Add(30100*time.Millisecond)) {
			t.Errorf("after the check came back: %+v, want loop since 100 ms", st)
		}
		if got, want := heard.get(), []string{"u0:loop"}; !slices.Equal(got, want) {
			t.Errorf("OnLoop heard %v, want %v", got, want)
		}
	})
}

// Only the latest check counts: one that comes back after a newer check
// was sent, and one of an upstream that is gone, change nothing.
func TestStaleCheckIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loops, heard := NewLoops(), &loopHeard{}
		f := &loopFake{loops: loops}
		pool := newLoopPool(t, loops, heard, f)
		synctest.Wait()
		u := pool.upstreams[0]
		pool.CheckLoops() // check 2, which does not come back
		synctest.Wait()
		old := f.sent()[0]
		if v := loops.Seen(old); v != OwnLoopCheck {
			t.Errorf("check 1 seen as %v", v)
		}
		if v := loops.Seen(loops.name(u.loopID+1, 1, loops.tag(u.loopID+1, 1, time.Now()))); v != OwnLoopCheck {
			t.Errorf("an unknown upstream's check seen as %v", v)
		}
		synctest.Wait()
		if st := pool.Status()[0]; st.Loop {
			t.Errorf("a stale check put the upstream in loop: %+v", st)
		}
		if got := heard.get(); len(got) != 0 {
			t.Errorf("OnLoop heard %v", got)
		}
	})
}

// CheckLoops (the daemon calls it once its listeners are bound) sends a
// healthy upstream a check alone, no probe, and finds a loop that formed
// after start-up.
func TestCheckLoops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		loops, heard := NewLoops(), &loopHeard{}
		f := &loopFake{loops: loops}
		pool := newLoopPool(t, loops, heard, f)
		synctest.Wait()
		time.Sleep(time.Second)
		f.setLooping(true, 0)
		pool.CheckLoops()
		synctest.Wait()
		checks, probes, _, _ := f.record()
		if want := secs(0, 1); !slices.Equal(since(t0, checks), want) {
			t.Errorf("checks at %v, want %v", since(t0, checks), want)
		}
		if want := secs(0); !slices.Equal(since(t0, probes), want) {
			t.Errorf("probes at %v, want only the start-up probe", since(t0, probes))
		}
		if st := pool.Status()[0]; !st.Loop || !st.LastErrorAt.Equal(t0.Add(time.Second)) {
			t.Errorf("after CheckLoops: %+v, want loop since 1s", st)
		}
	})
}

// A reload that keeps a looping upstream checks it again at once: the
// operator may have fixed the loop, and the upstream is back at the same
// instant, not 30 s later.
//
// Mutation check: without the recheck in NewPoolFrom the upstream is
// still looping after the reload.
func TestReloadRechecksALoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		loops, heard := NewLoops(), &loopHeard{}
		f := &loopFake{loops: loops, looping: true}
		old := newLoopPool(t, loops, heard, f)
		synctest.Wait()
		time.Sleep(5 * time.Second)
		f.setLooping(false, 0)
		p := defaults
		p.Health.Loops, p.Health.OnLoop = loops, heard.on
		next, err := NewPoolFrom(p, []Spec{{Name: "u0", Address: "fake", Slots: 4}}, []*Upstream{old.Upstream(0)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		old.CloseExcept(next)
		defer next.Close()
		if st := next.Status()[0]; st.Loop || st.InBackoff || !st.LastProbeAt.Equal(t0.Add(5*time.Second)) {
			t.Errorf("after the reload: %+v, want healthy at 5 s", st)
		}
		if got, want := heard.get(), []string{"u0:loop", "u0:gone"}; !slices.Equal(got, want) {
			t.Errorf("OnLoop heard %v, want %v", got, want)
		}
	})
}

// A check of a looping upstream that something on the path fails
// (SERVFAIL: what another nxdnsd whose own upstream loops answers) does
// not end the loop: it is checked again backoff_max later, without a
// probe. Only a check a resolver answers ends it.
//
// Mutation check: taking any answer for the loop's end heals u0 at 30 s.
func TestFailedCheckKeepsALoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		loops, heard := NewLoops(), &loopHeard{}
		f := &loopFake{loops: loops, looping: true}
		pool := newLoopPool(t, loops, heard, f)
		synctest.Wait()
		f.mu.Lock()
		f.looping, f.servfail = false, true
		f.mu.Unlock()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if st := pool.Status()[0]; !st.Loop || !st.BackoffUntil.Equal(t0.Add(60*time.Second)) {
			t.Fatalf("after a check answered SERVFAIL: %+v, want still looping, next check at 60 s", st)
		}
		f.setLooping(false, 0)
		f.mu.Lock()
		f.servfail = false
		f.mu.Unlock()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		checks, probes, _, _ := f.record()
		if want := secs(0, 30, 60); !slices.Equal(since(t0, checks), want) {
			t.Errorf("checks at %v, want %v", since(t0, checks), want)
		}
		if want := secs(60); !slices.Equal(since(t0, probes), want) {
			t.Errorf("probes at %v, want %v", since(t0, probes), want)
		}
		if st := pool.Status()[0]; st.Loop || st.InBackoff {
			t.Errorf("after a check answered NXDOMAIN: %+v, want healthy", st)
		}
		if got, want := heard.get(), []string{"u0:loop", "u0:gone"}; !slices.Equal(got, want) {
			t.Errorf("OnLoop heard %v, want %v", got, want)
		}
	})
}

// CheckLoops asked while a probe runs, whose check went out before the
// request, waits for the probe and then checks: the earlier check may
// have gone out before anything listened.
func TestCheckLoopsWaitsForTheRunningProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loops, heard := NewLoops(), &loopHeard{}
		gate := make(chan error)
		f := &loopFake{loops: loops}
		held := transport.ExchangerFunc(func(ctx context.Context, q *transport.Query, expiry time.Time) (transport.Answer, error) {
			if isProbe(q.Msg) {
				select { // the start-up probe is held until the test lets it go
				case <-gate:
				case <-ctx.Done():
					return transport.Answer{}, ctx.Err()
				}
			}
			return f.Exchange(ctx, q, expiry)
		})
		pool := newLoopPool(t, loops, heard, held)
		synctest.Wait() // the start-up check has gone out; its probe waits
		pool.CheckLoops()
		synctest.Wait()
		gate <- nil
		synctest.Wait()
		if checks, _, _, _ := f.record(); len(checks) != 2 {
			t.Errorf("%d checks, want 2: the start-up probe's and the one asked for, after it", len(checks))
		}

	})
}

// Seen tells this process's checks from another's and from other names,
// in every shape a name can take; a check's name has LoopCheckLen bytes.
func TestSeen(t *testing.T) {
	a, b := NewLoops(), NewLoops()
	sent := time.Now()
	name := a.name(7, 0xdeadbeef, a.tag(7, 0xdeadbeef, sent))
	if len(name) != LoopCheckLen || !strings.HasSuffix(name, "."+LoopCheckZone) || name != strings.ToLower(name) {
		t.Fatalf("name %q (%d bytes), want %d bytes in %s, in lower case", name, len(name), LoopCheckLen, LoopCheckZone)
	}
	if a.instance == b.instance || a.key == b.key {
		t.Fatal("two processes with one instance or one key")
	}
	if _, ok := dns.IsDomainName(name); !ok {
		t.Fatalf("%q is not a domain name", name)
	}
	for _, tc := range []struct {
		name string
		want LoopCheck
	}{
		{name, OwnLoopCheck},
		{b.name(7, 0xdeadbeef, b.tag(7, 0xdeadbeef, sent)), ForeignLoopCheck},
		{b.name(7, 0xdeadbeef, a.tag(7, 0xdeadbeef, sent)), ForeignLoopCheck},
		{a.name(7, 0xdeadbeef, b.tag(7, 0xdeadbeef, sent)), OwnLoopCheck}, // our instance, never our tag: answered, not forwarded
		{"example.com.", NotLoopCheck},
		{"x.invalid.", NotLoopCheck},
		{strings.Replace(name, "loop-check", "loop-chock", 1), NotLoopCheck},
		{"x" + name, NotLoopCheck},
		{strings.Replace(name, ".00000007.", ".0000000g.", 1), OwnLoopCheck}, // our secret, never our name: answered, not forwarded
		{strings.Replace(name, ".00000007.", "-00000007.", 1), OwnLoopCheck},
	} {
		if got := a.Seen(tc.name); got != tc.want {
			t.Errorf("Seen(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	q := checkQuestion(name)
	if q.Question[0].Qtype != dns.TypeTXT || !q.RecursionDesired || q.IsEdns0() == nil {
		t.Errorf("check %v", q)
	}
}

// The loop states of the pure breaker: a loop opens it for BackoffMax
// whatever its state, a confirming check pushes the next one out, an
// attempt's answer that came round the loop heals nothing, and a gone
// loop leaves an ordinary backoff whose probe is due at once.
func TestHealthLoop(t *testing.T) {
	p := HealthPolicy{FailureThreshold: 3, Backoff: time.Second, BackoffMax: 30 * time.Second}
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	h := Health{}.LoopFound(t0, p)
	if !h.Loop || !h.InBackoff || h.At() != Looping || !h.Until.Equal(at(30*time.Second)) || h.Length != 30*time.Second {
		t.Fatalf("loop found: %+v", h)
	}
	h = h.Success()
	if h.At() != Looping || h.Successes != 1 {
		t.Fatalf("an answer while looping: %+v, want counted, still looping", h)
	}
	h = h.Failure(at(time.Second), p)
	if h.At() != Looping || !h.Until.Equal(at(30*time.Second)) || h.Failures != 1 {
		t.Fatalf("a failure while looping: %+v, want counted, nothing moved", h)
	}
	h = h.LoopFound(at(30*time.Second), p)
	if h.At() != Looping || !h.Until.Equal(at(60*time.Second)) {
		t.Fatalf("a confirming check: %+v, want the next at 60 s", h)
	}
	h = h.ProbeLost(at(60*time.Second), p)
	if h.At() != Looping || !h.Until.Equal(at(61*time.Second)) {
		t.Fatalf("a check that said nothing: %+v, want looping, again at 61 s", h)
	}
	h = h.LoopGone(at(61*time.Second), p)
	if h.Loop || h.At() != BackedOff || !h.Until.Equal(at(61*time.Second)) || h.Length != time.Second {
		t.Fatalf("loop gone: %+v, want an ordinary backoff of 1 s, probe due at once", h)
	}
	if g := h.ProbeFailure(at(61*time.Second), false, p); g.At() != BackedOff || !g.Until.Equal(at(63*time.Second)) {
		t.Errorf("its probe failed: %+v, want backoff doubled to 2 s", g)
	}
	if g := h.ProbeSuccess(); g.At() != Healthy || g.Loop {
		t.Errorf("its probe answered: %+v, want healthy", g)
	}
	if g := (Health{}).LoopGone(t0, p); g != (Health{}) {
		t.Errorf("LoopGone of a healthy breaker: %+v, want unchanged", g)
	}

	// A loop found in an ordinary backoff takes over its schedule.
	b := Health{}.Failure(t0, p).Failure(t0, p).Failure(t0, p)
	b = b.LoopFound(at(500*time.Millisecond), p)
	if b.At() != Looping || !b.Until.Equal(at(30500*time.Millisecond)) || b.Consecutive != 3 {
		t.Errorf("loop found in backoff: %+v", b)
	}
}

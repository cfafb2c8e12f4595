package actors

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Forged and replayed loop checks (issue 25, item 1). A check's name goes
// to every upstream in clear, so its operator, or anyone who sees a
// udp:// upstream's traffic, has one; ids and sequences count from 1.
// None of that may let them take an upstream out of service: only a
// check this process sent, through the upstream its name claims, coming
// back once within its window, finds a loop.

// requireInService fails the test unless every upstream of pool is
// healthy and OnLoop heard nothing.
func requireInService(tb testing.TB, pool *Pool, heard *loopHeard) {
	tb.Helper()
	for _, st := range pool.Status() {
		if st.Loop || st.InBackoff {
			tb.Errorf("%s: loop %v, backoff %v, last error %v; want in service", st.Name, st.Loop, st.InBackoff, st.LastError)
		}
	}
	if got := heard.get(); len(got) != 0 {
		tb.Errorf("OnLoop heard %v, want nothing", got)
	}
}

// A name written from one captured check, for every upstream id and
// sequence, with the captured first label or a guessed one, marks
// nothing. (The captured name itself, replayed within its window, is the
// one name that may: TestReplayAfterTheWindowMarksNothing.)
//
// Fails before the HMAC: the captured secret, with each upstream's id and
// sequence 1, put all three in loop.
func TestForgedChecksMarkNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loops, heard := NewLoops(), &loopHeard{}
		fs := []*loopFake{{loops: loops}, {loops: loops}, {loops: loops}}
		pool := newLoopPool(t, loops, heard, fs[0], fs[1], fs[2])
		synctest.Wait()
		captured := fs[0].sent()[0]
		first, rest, _ := strings.Cut(captured, ".")
		n := 0
		for _, label := range []string{first, strings.Repeat("a", len(first)), strings.ToUpper(first)} {
			for id := uint32(0); id <= 8; id++ {
				for seq := uint32(0); seq <= 8; seq++ {
					name := relabel(label+"."+rest, id, seq)
					if strings.EqualFold(name, captured) {
						continue
					}
					if v := loops.Seen(strings.ToLower(name)); v == NotLoopCheck {
						t.Fatalf("Seen(%q) = %v", name, v)
					}
					n++
				}
			}
		}
		synctest.Wait()
		requireInService(t, pool, heard)
		t.Logf("%d forged names, from %s", n, captured)
	})
}

// A check that came back once, and put its upstream in loop, changes
// nothing when it comes back again, however often: the loop is heard of
// once, its next check stays where it was, and once the loop is gone the
// old name does not bring it back.
func TestReplayedCheckTakenOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		loops, heard := NewLoops(), &loopHeard{}
		f := &loopFake{loops: loops, looping: true}
		pool := newLoopPool(t, loops, heard, f)
		synctest.Wait()
		captured := f.sent()[0]
		time.Sleep(time.Second)
		for range 16 {
			if v := loops.Seen(captured); v != OwnLoopCheck {
				t.Fatalf("Seen = %v, want OwnLoopCheck: answered, never forwarded", v)
			}
		}
		synctest.Wait()
		if st := pool.Status()[0]; !st.Loop || !st.LastErrorAt.Equal(t0) || !st.BackoffUntil.Equal(t0.Add(30*time.Second)) {
			t.Errorf("after 16 replays: %+v, want the loop found at 0, next check at 30 s", st)
		}
		f.setLooping(false, 0)
		time.Sleep(29 * time.Second) // the check at 30 s is answered: the loop is gone
		synctest.Wait()
		loops.Seen(captured)
		synctest.Wait()
		if st := pool.Status()[0]; st.Loop || st.InBackoff {
			t.Errorf("the first check replayed after the loop was gone: %+v, want healthy", st)
		}
		if got, want := heard.get(), []string{"u0:loop", "u0:gone"}; !slices.Equal(got, want) {
			t.Errorf("OnLoop heard %v, want %v", got, want)
		}
	})
}

// A healthy upstream is not checked again: its last check stays its
// latest for as long as it stays healthy. Sent back a minute later, well
// past its window, it marks nothing.
//
// Fails before the window: the start-up check, replayed a minute later,
// put the upstream in loop.
func TestReplayAfterTheWindowMarksNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loops, heard := NewLoops(), &loopHeard{}
		f := &loopFake{loops: loops}
		pool := newLoopPool(t, loops, heard, f)
		synctest.Wait()
		captured := f.sent()
		if len(captured) != 1 {
			t.Fatalf("checks %v, want the start-up check alone", captured)
		}
		time.Sleep(time.Minute)
		if v := loops.Seen(captured[0]); v != OwnLoopCheck {
			t.Errorf("Seen = %v, want OwnLoopCheck: answered, never forwarded", v)
		}
		synctest.Wait()
		requireInService(t, pool, heard)
	})
}

// A check sent through u0 that comes back marks u0 alone; the same name
// with u1's id and latest sequence marks nothing: a check proves a loop
// through the upstream it was sent through, no other.
//
// Fails before the HMAC: u0's check with u1's id put u1 in loop.
func TestCheckMarksOnlyItsOwnUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loops, heard := NewLoops(), &loopHeard{}
		f0, f1 := &loopFake{loops: loops, looping: true}, &loopFake{loops: loops}
		pool := newLoopPool(t, loops, heard, f0, f1)
		synctest.Wait()
		if st := pool.Status(); !st[0].Loop || st[1].Loop || st[1].InBackoff {
			t.Fatalf("after the start-up checks: u0 loop %v, u1 loop %v backoff %v; want u0 alone in loop", st[0].Loop, st[1].Loop, st[1].InBackoff)
		}
		u1 := pool.upstreams[1]
		loops.Seen(relabel(f0.sent()[0], u1.loopID, u1.checkSeq.Load()))
		synctest.Wait()
		if st := pool.Status()[1]; st.Loop || st.InBackoff {
			t.Errorf("u1 after u0's check came back with u1's id: %+v, want healthy", st)
		}
		if got, want := heard.get(), []string{"u0:loop"}; !slices.Equal(got, want) {
			t.Errorf("OnLoop heard %v, want %v", got, want)
		}
	})
}

// The window and the tag, on an injected clock: a check's own tag is taken
// from the instant it was sent until its window ends, never before, never
// after; a tag of any other upstream, sequence, instant or process never.
func TestSentCheckAccepts(t *testing.T) {
	l := NewLoops()
	t0 := time.Unix(1_000_000, 0)
	c := &sentCheck{seq: 3, tag: l.tag(1, 3, t0), sent: t0, until: t0.Add(CheckWindow)}
	if len(c.tag) != tagLen || c.tag != strings.ToLower(c.tag) || c.tag != l.tag(1, 3, t0) {
		t.Fatalf("tag %q: want %d lower-case digits, the same for the same check", c.tag, tagLen)
	}
	for _, tc := range []struct {
		name string
		tag  string
		at   time.Duration
		want bool
	}{
		{"at once", c.tag, 0, true},
		{"as its window ends", c.tag, CheckWindow - time.Nanosecond, true},
		{"once its window has ended", c.tag, CheckWindow, false},
		{"a minute later", c.tag, time.Minute, false},
		{"before it was sent", c.tag, -time.Nanosecond, false},
		{"another upstream's", l.tag(2, 3, t0), 0, false},
		{"another sequence's", l.tag(1, 4, t0), 0, false},
		{"sent a nanosecond later", l.tag(1, 3, t0.Add(time.Nanosecond)), 0, false},
		{"another process's", NewLoops().tag(1, 3, t0), 0, false},
		{"its prefix", c.tag[:tagLen-1], 0, false},
		{"upper case", strings.ToUpper(c.tag), 0, false},
		{"empty", "", 0, false},
	} {
		if got := c.accepts(tc.tag, func() time.Time { return t0.Add(tc.at) }); got != tc.want {
			t.Errorf("%s: accepts(%q, %v) = %v, want %v", tc.name, tc.tag, tc.at, got, tc.want)
		}
	}
}

// A check's window is CheckWindow, or its probe timeout when that is
// longer: a check comes back during its own exchange or after it.
func TestCheckWindow(t *testing.T) {
	for _, probe := range []time.Duration{time.Second, 2 * CheckWindow} {
		synctest.Test(t, func(t *testing.T) {
			loops := NewLoops()
			p := defaults
			p.Health.Loops, p.Health.ProbeTimeout = loops, probe
			pool, err := NewPool(p, []Spec{{Name: "u0", Address: "fake", Slots: 1, Transport: &loopFake{loops: loops}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			synctest.Wait()
			c := pool.upstreams[0].lastCheck.Load()
			if want := max(probe, CheckWindow); c == nil || c.seq != 1 || c.until.Sub(c.sent) != want {
				t.Errorf("probe timeout %v: the start-up check %+v, want a window of %v", probe, c, want)
			}
		})
	}
}

// noneHeard records OnLoopLeavesNone's calls as "upstream: the pool's
// states".
type noneHeard struct {
	mu    sync.Mutex
	calls []string
}

func (h *noneHeard) on(upstream string, pool []Status) {
	states := make([]string, len(pool))
	for i, st := range pool {
		switch {
		case st.Loop:
			states[i] = st.Name + "=loop"
		case st.InBackoff:
			states[i] = st.Name + "=backoff"
		default:
			states[i] = st.Name + "=healthy"
		}
	}
	h.mu.Lock()
	h.calls = append(h.calls, upstream+": "+strings.Join(states, " "))
	h.mu.Unlock()
}

func (h *noneHeard) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// A loop that leaves no upstream of the pool in service (the others loop
// or are in backoff) is reported once, with every upstream's state; one
// that leaves an upstream in service is not. (An upstream that goes into
// backoff after the loop was found is the failure path's, not the loop's:
// pass two still tries it.)
func TestLoopLeavingNoneReported(t *testing.T) {
	const late = 100 * time.Millisecond // u0's check comes back after u1's start-up probe has ended
	for _, tc := range []struct {
		name string
		u1   func(*Loops) transport.Exchanger // nil: u0 alone
		want []string
	}{
		{"the only upstream loops", nil, []string{"u0: u0=loop"}},
		{"the other loops too", func(l *Loops) transport.Exchanger { return &loopFake{loops: l, looping: true} }, []string{"u0: u0=loop u1=loop"}},
		{"the other is in backoff", func(*Loops) transport.Exchanger { return transport.MsgFunc(refusing) }, []string{"u0: u0=loop u1=backoff"}},
		{"the other answers", func(l *Loops) transport.Exchanger { return &loopFake{loops: l} }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loops, none := NewLoops(), &noneHeard{}
				p := defaults
				p.Health.Loops, p.Health.OnLoopLeavesNone = loops, none.on
				p.Health.FailureThreshold = 1
				specs := []Spec{{Name: "u0", Address: "fake", Slots: 4, Transport: &loopFake{loops: loops, looping: true, late: late}}}
				if tc.u1 != nil {
					specs = append(specs, Spec{Name: "u1", Address: "fake", Slots: 4, Transport: tc.u1(loops)})
				}
				pool, err := NewPool(p, specs, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer pool.Close()
				time.Sleep(late)
				synctest.Wait()
				if st := pool.Status()[0]; !st.Loop {
					t.Fatalf("u0 %+v, want loop", st)
				}
				if got := none.get(); !slices.Equal(got, tc.want) {
					t.Errorf("heard %q, want %q", got, tc.want)
				}
			})
		})
	}
}

// loopNames are the names Seen is asked about, by kind, for one upstream
// of l whose latest check is real: that check, a forgery of ours, another
// nxdnsd's and an ordinary name.
func loopNames(tb testing.TB, l *Loops, real string) map[string]string {
	tb.Helper()
	other := NewLoops()
	return map[string]string{
		"its check":        real,
		"forged":           strings.Repeat("a", tagLen) + real[tagLen:],
		"another nxdnsd's": other.name(1, 1, other.tag(1, 1, time.Now())),
		"other":            "www.example.com.",
	}
}

// Seen allocates nothing, whatever the name: a flood of forged checks
// costs the query path no garbage.
func TestSeenAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	synctest.Test(t, func(t *testing.T) {
		loops, heard := NewLoops(), &loopHeard{}
		f := &loopFake{loops: loops}
		newLoopPool(t, loops, heard, f)
		synctest.Wait()
		for kind, name := range loopNames(t, loops, f.sent()[0]) {
			if kind == "its check" {
				continue // taken once: it reports to the actor
			}
			if n := testing.AllocsPerRun(100, func() { loops.Seen(name) }); n != 0 {
				t.Errorf("Seen(%s) allocates %v objects", kind, n)
			}
		}
	})
}

// BenchmarkSeen is what the query path pays Seen for a name of a check's
// length, by kind (a name of any other length costs one comparison).
func BenchmarkSeen(b *testing.B) {
	loops := NewLoops()
	f := &loopFake{loops: loops}
	p := defaults
	p.Health.Loops = loops
	pool, err := NewPool(p, []Spec{{Name: "u0", Address: "fake", Slots: 1, Transport: f}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	pool.Sync()
	for pool.upstreams[0].lastCheck.Load() == nil || len(f.sent()) == 0 {
		pool.Sync() // the start-up check is on its way: it takes microseconds
	}
	for _, kind := range []string{"forged", "another nxdnsd's", "other"} {
		name := loopNames(b, loops, f.sent()[0])[kind]
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				loops.Seen(name)
			}
		})
	}
}

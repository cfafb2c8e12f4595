package actors

import (
	"errors"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// The network's state as a pure function of the upstreams' last words
// and an injected now.
func TestNetworkOf(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const window = 3 * time.Second
	cut := func(name string, at time.Duration) Status {
		return Status{Name: name, LastLocalError: noRoute, LastLocalErrorAt: t0.Add(at)}
	}
	answered := func(s Status, at time.Duration) Status {
		s.LastRecordedAt = t0.Add(at)
		return s
	}
	looping := cut("l", 0)
	looping.Loop, looping.LastLocalErrorAt = true, t0.Add(-time.Hour)
	for _, tc := range []struct {
		name string
		st   []Status
		now  time.Duration
		down bool
		last string // whose local error is the last
	}{
		{"no upstream", nil, 0, false, ""},
		{"nothing seen yet", []Status{{Name: "a"}, {Name: "b"}}, 0, false, ""},
		{"every upstream's last word a local error", []Status{cut("a", 0), cut("b", -time.Second)}, 0, true, "a"},
		{"one answered since its local error", []Status{cut("a", 0), answered(cut("b", -time.Second), -time.Millisecond)}, 0, false, "a"},
		{"an answer older than the local error", []Status{answered(cut("a", 0), -time.Millisecond)}, 0, true, "a"},
		{"a failure recorded since (the path is back, the upstream is not)", []Status{answered(cut("a", 0), time.Millisecond)}, time.Millisecond, false, "a"},
		{"one never heard of", []Status{cut("a", 0), {Name: "b"}}, 0, false, "a"},
		{"within the window", []Status{cut("a", 0)}, window - time.Nanosecond, true, "a"},
		{"the window passed with no word since", []Status{cut("a", 0)}, window, false, "a"},
		{"a looping upstream says nothing", []Status{cut("a", 0), looping}, 0, true, "a"},
		{"only looping upstreams", []Status{looping}, 0, false, "l"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := NetworkOf(tc.st, t0.Add(tc.now), window)
			if n.Down != tc.down || n.Upstream != tc.last {
				t.Errorf("down %v, last local error %q's; want %v, %q's", n.Down, n.Upstream, tc.down, tc.last)
			}
			if tc.last != "" && !errors.Is(n.LastError, syscall.ENETUNREACH) {
				t.Errorf("last local error %v", n.LastError)
			}
		})
	}
}

// With no route out, the start-up probes find the network down; the
// actors keep probing every backoff_ms although the upstreams stay
// healthy (a local error records nothing), so the first probe answered
// once a route returns says so, a probe interval later at most; client
// attempts' local errors, told by Pool.LocalError, cut an upstream off
// again and start its probes, and an answer stops them.
//
// Mutation check: without the link probes (schedule leaving a healthy
// upstream unarmed), only the start-up probes run and the network stays
// down after the route returns.
func TestLinkProbesFollowTheNetwork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		pool, fakes := newTestPool(t, defaults, up{fn: unroutable, probe: unroutable}, up{fn: unroutable, probe: unroutable})
		synctest.Wait()
		if n := pool.Network(time.Now()); !n.Down || !errors.Is(n.LastError, syscall.ENETUNREACH) || !n.LastErrorAt.Equal(t0) {
			t.Fatalf("after the start-up probes: %+v, want down with the local error", n)
		}
		for i, st := range pool.Status() {
			if st.InBackoff || st.LastError != nil {
				t.Fatalf("u%d: %+v; want healthy, nothing recorded", i, st)
			}
		}
		time.Sleep(3500 * time.Millisecond)
		if n := pool.Network(time.Now()); !n.Down {
			t.Fatalf("at 3.5s, no route yet: %+v, want still down", n)
		}
		for i, f := range fakes {
			if got, want := f.started(t0), secs(0, 1, 2, 3); !slices.Equal(got, want) {
				t.Errorf("u%d: probes started at %v, want every backoff_ms: %v", i, got, want)
			}
		}

		// The route returns at 3.5s: u1's probe at 4s answers.
		fakes[1].setProbe(answering)
		fakes[1].fn = answering
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if n := pool.Network(time.Now()); n.Down {
			t.Fatalf("after u1's probe answered: %+v, want not down", n)
		}
		time.Sleep(4500 * time.Millisecond)
		if got, want := fakes[1].started(t0), secs(0, 1, 2, 3, 4); !slices.Equal(got, want) {
			t.Errorf("u1: probes started at %v, want none after its answer: %v", got, want)
		}
		if got, want := fakes[0].started(t0), secs(0, 1, 2, 3, 4, 5, 6, 7, 8); !slices.Equal(got, want) {
			t.Errorf("u0, still without a route: probes started at %v, want %v", got, want)
		}

		// u1's route goes again: a client attempt's local error cuts it
		// off at once, and its actor probes it a backoff_ms later.
		fakes[1].fn = unroutable
		fakes[1].setProbe(unroutable)
		at := time.Now()
		pool.LocalError("u1", at, noRoute)
		pool.LocalError("nobody", at, noRoute) // a removed upstream's: ignored
		pool.sync()
		if n := pool.Network(time.Now()); !n.Down || n.Upstream != "u1" || !n.LastErrorAt.Equal(at) {
			t.Fatalf("after u1's attempt found no route: %+v, want down, u1's error last", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := fakes[1].started(t0); len(got) != 6 || got[5] != at.Sub(t0)+time.Second {
			t.Errorf("u1: probes started at %v, want one a backoff_ms after its attempt's local error (%v)", got, at.Sub(t0))
		}
		st := pool.Status()[1]
		if st.InBackoff || st.Failures != 0 || st.Probes[OutcomeLocalError] != 5 {
			t.Errorf("u1: %+v; want healthy, nothing recorded, 5 probes without a route", st)
		}
	})
}

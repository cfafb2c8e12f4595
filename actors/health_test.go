package actors

import (
	"testing"
	"time"
)

func TestHealthStateMachine(t *testing.T) {
	p := HealthPolicy{FailureThreshold: 3, Backoff: time.Second, BackoffMax: 5 * time.Second}
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	type step struct {
		// "ok", "fail": an attempt's answer or failure; "probe-ok",
		// "probe-fail", "probe-fail-all-down", "probe-lost": a probe's
		// answer, failure (with every upstream in backoff) or local error.
		event string
		at    time.Duration
		// expected after the event
		inBackoff   bool
		until       time.Duration // relative to t0, when in backoff
		consecutive int
		failures    uint64
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"below threshold stays healthy", []step{
			{"fail", 0, false, 0, 1, 1},
			{"fail", 1, false, 0, 2, 2},
			{"ok", 2, false, 0, 0, 2},
			{"fail", 3, false, 0, 1, 3},
		}},
		{"threshold opens the breaker", []step{
			{"fail", 0, false, 0, 1, 1},
			{"fail", 0, false, 0, 2, 2},
			{"fail", 10 * time.Millisecond, true, time.Second + 10*time.Millisecond, 3, 3},
		}},
		{"failures in backoff are counted and move nothing", []step{
			{"fail", 0, false, 0, 1, 1},
			{"fail", 0, false, 0, 2, 2},
			{"fail", 0, true, time.Second, 3, 3},
			{"fail", 500 * time.Millisecond, true, time.Second, 4, 4}, // a stale timeout
			{"fail", 2 * time.Second, true, time.Second, 5, 5},        // a pass-two failure after the backoff ended
		}},
		{"failed probes double up to the ceiling and are not counted", []step{
			{"fail", 0, false, 0, 1, 1},
			{"fail", 0, false, 0, 2, 2},
			{"fail", 0, true, time.Second, 3, 3},
			{"probe-fail", time.Second, true, 3 * time.Second, 3, 3},       // 2 s
			{"probe-fail", 3 * time.Second, true, 7 * time.Second, 3, 3},   // 4 s
			{"probe-fail", 7 * time.Second, true, 12 * time.Second, 3, 3},  // 8 s capped at 5 s
			{"probe-fail", 12 * time.Second, true, 17 * time.Second, 3, 3}, // stays 5 s
			{"probe-ok", 17 * time.Second, false, 0, 0, 3},                 // a probe's answer heals
			{"fail", 18 * time.Second, false, 0, 1, 4},                     // counting starts over
		}},
		{"all down: probes keep the first backoff", []step{
			{"fail", 0, false, 0, 1, 1},
			{"fail", 0, false, 0, 2, 2},
			{"fail", 0, true, time.Second, 3, 3},
			{"probe-fail", time.Second, true, 3 * time.Second, 3, 3},              // 2 s: another upstream was healthy
			{"probe-fail-all-down", 3 * time.Second, true, 4 * time.Second, 3, 3}, // 1 s
			{"probe-fail-all-down", 4 * time.Second, true, 5 * time.Second, 3, 3}, // 1 s
			{"probe-fail", 5 * time.Second, true, 7 * time.Second, 3, 3},          // another upstream recovered: 2 s again
		}},
		{"a failed start-up probe opens the breaker at once", []step{
			{"probe-fail", 0, true, time.Second, 0, 0},
			{"probe-ok", time.Second, false, 0, 0, 0},
		}},
		{"a start-up probe's answer changes nothing", []step{
			{"fail", 0, false, 0, 1, 1},
			{"probe-ok", 0, false, 0, 1, 1},
		}},
		{"a lost probe retries after the first backoff", []step{
			{"fail", 0, false, 0, 1, 1},
			{"fail", 0, false, 0, 2, 2},
			{"fail", 0, true, time.Second, 3, 3},
			{"probe-fail", time.Second, true, 3 * time.Second, 3, 3},     // 2 s
			{"probe-lost", 3 * time.Second, true, 4 * time.Second, 3, 3}, // no route: again in 1 s
			{"probe-fail", 4 * time.Second, true, 8 * time.Second, 3, 3}, // the 2 s backoff doubles, undisturbed
			{"probe-lost", 8 * time.Second, true, 9 * time.Second, 3, 3},
			{"probe-ok", 9 * time.Second, false, 0, 0, 3},
			{"probe-lost", 10 * time.Second, false, 0, 0, 3}, // healthy: nothing to do
		}},
		{"a pass-two answer heals", []step{
			{"fail", 0, false, 0, 1, 1},
			{"fail", 0, false, 0, 2, 2},
			{"fail", 0, true, time.Second, 3, 3},
			{"ok", 500 * time.Millisecond, false, 0, 0, 3},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Health
			for i, s := range tc.steps {
				switch s.event {
				case "ok":
					h = h.Success()
				case "fail":
					h = h.Failure(at(s.at), p)
				case "probe-ok":
					h = h.ProbeSuccess()
				case "probe-fail":
					h = h.ProbeFailure(at(s.at), false, p)
				case "probe-fail-all-down":
					h = h.ProbeFailure(at(s.at), true, p)
				case "probe-lost":
					h = h.ProbeLost(at(s.at), p)
				default:
					t.Fatalf("step %d: unknown event %q", i, s.event)
				}
				if h.InBackoff != s.inBackoff || h.Consecutive != s.consecutive || h.Failures != s.failures {
					t.Fatalf("step %d (%s): in backoff=%v consecutive=%d failures=%d, want %v %d %d",
						i, s.event, h.InBackoff, h.Consecutive, h.Failures, s.inBackoff, s.consecutive, s.failures)
				}
				if s.inBackoff && !h.Until.Equal(at(s.until)) {
					t.Fatalf("step %d (%s): until %v, want %v", i, s.event, h.Until.Sub(t0), s.until)
				}
				if !s.inBackoff && (!h.Until.IsZero() || h.Length != 0) {
					t.Fatalf("step %d (%s): healthy with until %v, length %v", i, s.event, h.Until, h.Length)
				}
			}
		})
	}
}

// Eligibility depends on the breaker alone: an upstream whose backoff has
// ended stays backed off until a probe heals it (there is no half-open
// moment for a client to slip through).
func TestEligibility(t *testing.T) {
	t0 := time.Unix(1000, 0)
	open := Health{InBackoff: true, Until: t0.Add(time.Second), Length: time.Second}
	if got := (Health{}).At(); got != Healthy {
		t.Errorf("a healthy breaker: %d, want Healthy", got)
	}
	if got := open.At(); got != BackedOff {
		t.Errorf("an open breaker: %d, want BackedOff", got)
	}
}

// RFC 6298's estimator, with its gains of 1/8 and 1/4, in exact
// nanoseconds.
func TestRTTSample(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	var e RTT
	for i, tc := range []struct {
		sample       time.Duration
		srtt, rttvar time.Duration
	}{
		{ms(40), ms(40), ms(20)},                    // first: SRTT = R, RTTVAR = R/2
		{ms(10), ms(36.25), ms(22.5)},               // RTTVAR = 3/4·20 + 1/4·30; SRTT = 7/8·40 + 1/8·10
		{ms(20), ms(34.21875), ms(20.9375)},         // RTTVAR = 3/4·22.5 + 1/4·16.25
		{ms(34.21875), ms(34.21875), ms(15.703125)}, // a sample equal to SRTT only shrinks RTTVAR
	} {
		e = e.Sample(tc.sample)
		if e.SRTT != tc.srtt || e.RTTVar != tc.rttvar || e.Samples != uint64(i+1) {
			t.Errorf("after sample %d (%v): srtt %v rttvar %v samples %d, want %v %v %d", i, tc.sample, e.SRTT, e.RTTVar, e.Samples, tc.srtt, tc.rttvar, i+1)
		}
	}
}

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
		event string // "ok", "fail", "probe-fail"
		at    time.Duration
		// expected after the event
		inBackoff   bool
		until       time.Duration // relative to t0, when in backoff
		consecutive int
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"below threshold stays healthy", []step{
			{"fail", 0, false, 0, 1},
			{"fail", 1, false, 0, 2},
			{"ok", 2, false, 0, 0},
			{"fail", 3, false, 0, 1},
		}},
		{"threshold opens the breaker", []step{
			{"fail", 0, false, 0, 1},
			{"fail", 0, false, 0, 2},
			{"fail", 10 * time.Millisecond, true, time.Second + 10*time.Millisecond, 3},
		}},
		{"stale failures do not extend backoff", []step{
			{"fail", 0, false, 0, 1},
			{"fail", 0, false, 0, 2},
			{"fail", 0, true, time.Second, 3},
			{"fail", 500 * time.Millisecond, true, time.Second, 4},
		}},
		{"failed probes double up to the ceiling", []step{
			{"fail", 0, false, 0, 1},
			{"fail", 0, false, 0, 2},
			{"fail", 0, true, time.Second, 3},
			{"probe-fail", time.Second, true, 3 * time.Second, 4},       // 2 s
			{"probe-fail", 3 * time.Second, true, 7 * time.Second, 5},   // 4 s
			{"probe-fail", 7 * time.Second, true, 12 * time.Second, 6},  // 8 s capped at 5 s
			{"probe-fail", 12 * time.Second, true, 17 * time.Second, 7}, // stays 5 s
			{"ok", 17 * time.Second, false, 0, 0},                       // any success closes
			{"fail", 18 * time.Second, false, 0, 1},                     // counting starts over
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Health
			for i, s := range tc.steps {
				switch s.event {
				case "ok":
					h = h.Success()
				case "fail":
					h = h.Failure(at(s.at), false, p)
				case "probe-fail":
					h = h.Failure(at(s.at), true, p)
				}
				if h.InBackoff != s.inBackoff || h.Consecutive != s.consecutive {
					t.Fatalf("step %d: in backoff=%v consecutive=%d, want %v %d", i, h.InBackoff, h.Consecutive, s.inBackoff, s.consecutive)
				}
				if s.inBackoff && !h.Until.Equal(at(s.until)) {
					t.Fatalf("step %d: until %v, want %v", i, h.Until.Sub(t0), s.until)
				}
			}
		})
	}
}

func TestEligibility(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := Health{InBackoff: true, Until: t0.Add(time.Second), Length: time.Second}
	for _, tc := range []struct {
		h    Health
		now  time.Time
		want Eligibility
	}{
		{Health{}, t0, Healthy},
		{h, t0, BackedOff},
		{h, t0.Add(999 * time.Millisecond), BackedOff},
		{h, t0.Add(time.Second), HalfOpen},
		{h, t0.Add(time.Hour), HalfOpen},
	} {
		if got := tc.h.At(tc.now); got != tc.want {
			t.Errorf("At(%v) = %d, want %d", tc.now.Sub(t0), got, tc.want)
		}
	}
}

package actors

import "time"

// HealthPolicy is the circuit breaker's configuration (spec section 4,
// "Health").
type HealthPolicy struct {
	FailureThreshold int           // consecutive recorded failures that open the breaker
	Backoff          time.Duration // first backoff
	BackoffMax       time.Duration // ceiling for the doubling
}

// Health is one upstream's circuit breaker. It is a pure value: every
// method returns the next state from an event and the time it happened, so
// the whole policy is table-tested without goroutines. The upstream's actor
// is the only owner of the live value.
type Health struct {
	Successes   uint64        // recorded successes since start
	Failures    uint64        // recorded failures since start
	Consecutive int           // recorded failures since the last success
	InBackoff   bool          // the breaker is open (or half-open once Until passed)
	Until       time.Time     // end of the current backoff; zero when healthy
	Length      time.Duration // length of the current backoff; zero when healthy
}

// Eligibility is what the dispatch may do with an upstream right now.
type Eligibility uint8

const (
	Healthy   Eligibility = iota // take slots freely
	BackedOff                    // skip in pass one; pass two may probe
	HalfOpen                     // the backoff ended: one trial query may try it
)

// At reports the upstream's eligibility at now.
func (h Health) At(now time.Time) Eligibility { return eligibility(h.InBackoff, h.Until, now) }

func eligibility(inBackoff bool, until, now time.Time) Eligibility {
	switch {
	case !inBackoff:
		return Healthy
	case now.Before(until):
		return BackedOff
	default:
		return HalfOpen
	}
}

// Success records an answer: any recorded success closes the breaker.
func (h Health) Success() Health {
	h.Successes++
	h.Consecutive = 0
	h.InBackoff = false
	h.Until = time.Time{}
	h.Length = 0
	return h
}

// Failure records a failure observed at now. probe says whether the attempt
// was a half-open trial or a pass-two probe: only those re-arm an open
// breaker, with twice the backoff up to the ceiling. A failure of an
// ordinary attempt that started before the breaker opened is counted but
// does not extend the backoff, so a slot-full of stale timeouts cannot
// drive it to the ceiling at once.
func (h Health) Failure(now time.Time, probe bool, p HealthPolicy) Health {
	h.Failures++
	h.Consecutive++
	switch {
	case !h.InBackoff:
		if h.Consecutive >= p.FailureThreshold {
			h.InBackoff = true
			h.Length = p.Backoff
			h.Until = now.Add(h.Length)
		}
	case probe:
		h.Length = min(2*h.Length, p.BackoffMax)
		h.Until = now.Add(h.Length)
	}
	return h
}

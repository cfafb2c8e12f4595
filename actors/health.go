package actors

import "time"

// HealthPolicy is the circuit breaker's configuration (spec section 4,
// "Health").
type HealthPolicy struct {
	FailureThreshold int           // consecutive recorded failures that open the breaker
	Backoff          time.Duration // first backoff, and the probe interval while every upstream is in backoff
	BackoffMax       time.Duration // ceiling for the doubling

	// ProbeTimeout is one health probe's observation interval. Zero turns
	// probing off: no start-up probe, and an upstream in backoff returns
	// to service only through a pass-two answer. The daemon always probes
	// (upstream.probe_timeout_ms is at least 1); tests of other packages
	// that build a pool to exercise a transport leave it at zero, so that
	// their fakes see only their own queries.
	ProbeTimeout time.Duration

	// OnProbe, when set, is called on the upstream's actor goroutine once
	// a probe's outcome has been applied: a Status taken after it shows
	// the probe. It must return quickly; the daemon logs with it.
	OnProbe func(upstream string, o Outcome, st Status)

	// Loops, when set, are the process's loop checks (loop.go): every
	// probe is preceded by one, so that an upstream that forwards back to
	// nxdnsd is taken out of service. Nil sends none. An upstream keeps
	// the Loops it was created with.
	Loops *Loops

	// OnLoop, when set, is called on the upstream's actor goroutine when
	// a loop is found through the upstream (looping true) and when a
	// later check finds it gone (false): once each way, however many
	// checks confirm it in between. It must return quickly; the daemon
	// logs with it.
	OnLoop func(upstream string, looping bool, st Status)

	// OnLoopLeavesNone, when set, is called on the upstream's actor
	// goroutine, after OnLoop, when the loop just found through the
	// upstream leaves no upstream of its pool in service: every other one
	// loops or is in backoff. pool is every upstream's status, in
	// priority order. It must return quickly; the daemon logs with it.
	OnLoopLeavesNone func(upstream string, pool []Status)
}

// Health is one upstream's circuit breaker. It is a pure value: every
// method returns the next state from an event and the time it happened, so
// the whole policy is table-tested without goroutines. The upstream's actor
// is the only owner of the live value.
//
// Client attempts and the actor's probes play different parts. Attempts
// are counted (Successes, Failures, Consecutive) and open the breaker at
// the threshold; once it is open, only probes set the schedule, so no
// client query is ever the trial. Probes are counted nowhere here (they
// have their own counter, nxdns_upstream_probes_total).
type Health struct {
	Successes   uint64        // recorded successes of attempts since start
	Failures    uint64        // recorded failures of attempts since start
	Consecutive int           // recorded attempt failures since the last success (or heal)
	InBackoff   bool          // the breaker is open
	Loop        bool          // a loop check came back through the upstream: out of service (the breaker is open too)
	Until       time.Time     // end of the current backoff, when the next probe is due; zero when healthy
	Length      time.Duration // length of the current backoff; zero when healthy
}

// Eligibility is what the dispatch may do with an upstream right now.
type Eligibility uint8

const (
	Healthy   Eligibility = iota // take slots freely
	BackedOff                    // skip in pass one; pass two may try it
	Looping                      // it forwards back to nxdnsd: skip in both passes
)

// At reports the upstream's eligibility. An upstream stays backed off
// after its backoff ends, until a probe's answer (or a pass-two answer)
// heals it: the end of a backoff lets a probe through, not a client. A
// looping upstream is out of service until a check no longer loops.
func (h Health) At() Eligibility {
	switch {
	case h.Loop:
		return Looping
	case h.InBackoff:
		return BackedOff
	}
	return Healthy
}

// Success records an answered attempt. Any recorded success closes the
// breaker: a pass-two attempt of a backed-off upstream is the only client
// attempt it sees, and its answer is the same evidence a probe's is. An
// answer that was on its way while a loop was found (it came round the
// loop) is counted and heals nothing.
func (h Health) Success() Health {
	h.Successes++
	if h.Loop {
		return h
	}
	return h.heal()
}

// Failure records a failed attempt observed at now. The threshold-th
// consecutive one opens the breaker for Backoff. While the breaker is
// open a failure is counted and changes nothing else: the probes own the
// schedule, so neither a pass-two failure nor a slot-full of stale
// timeouts can push it towards the ceiling.
func (h Health) Failure(now time.Time, p HealthPolicy) Health {
	h.Failures++
	h.Consecutive++
	if !h.InBackoff && h.Consecutive >= p.FailureThreshold {
		h = h.open(now, p.Backoff)
	}
	return h
}

// ProbeSuccess records a probe's answer: the breaker closes. Nothing is
// counted.
func (h Health) ProbeSuccess() Health {
	if !h.InBackoff {
		return h // a start-up probe of a healthy upstream: nothing to heal
	}
	return h.heal()
}

// ProbeFailure records a probe's failure (a full expiry or a peer fault)
// at now. A healthy upstream (its start-up probe failed) goes into
// backoff at once, for Backoff. One in backoff goes back for twice as
// long, up to BackoffMax, unless allDown: while every enabled upstream is
// in backoff the next probe comes after Backoff again, so that service
// returns about Backoff after the network does. Nothing is counted.
func (h Health) ProbeFailure(now time.Time, allDown bool, p HealthPolicy) Health {
	switch {
	case !h.InBackoff:
		return h.open(now, p.Backoff)
	case allDown:
		h.Length = p.Backoff
	default:
		h.Length = min(2*h.Length, p.BackoffMax)
	}
	h.Until = now.Add(h.Length)
	return h
}

// ProbeLost records a probe that ended without evidence about the
// upstream (a local error: no route, no sockets): nothing is recorded,
// and an upstream in backoff is probed again after Backoff, its backoff
// length unchanged. A dead link is not a dead upstream, and the link may
// be back soon.
func (h Health) ProbeLost(now time.Time, p HealthPolicy) Health {
	if h.InBackoff {
		h.Until = now.Add(p.Backoff)
	}
	return h
}

// LoopFound records, at now, a loop check that came back through the
// upstream: it forwards to something that forwards back to nxdnsd. It is
// out of service in both passes, and checked again after BackoffMax (Until):
// a loop is a configuration, not a passing fault, so it is not retried
// sooner. A check that still loops keeps it there for another BackoffMax.
// Attempt counts are untouched.
func (h Health) LoopFound(now time.Time, p HealthPolicy) Health {
	h.Loop = true
	return h.open(now, p.BackoffMax)
}

// LoopGone records, at now, a loop check that did not come back: the
// loop is gone, and the upstream is an ordinary one whose backoff of
// Backoff has just begun and whose probe is due at once. The probe that
// ran behind the check (or the one that follows) decides whether it
// heals.
func (h Health) LoopGone(now time.Time, p HealthPolicy) Health {
	if !h.Loop {
		return h
	}
	h.Loop = false
	h.Length = p.Backoff
	h.Until = now
	return h
}

func (h Health) open(now time.Time, length time.Duration) Health {
	h.InBackoff = true
	h.Length = length
	h.Until = now.Add(length)
	return h
}

func (h Health) heal() Health {
	h.Consecutive = 0
	h.InBackoff = false
	h.Loop = false
	h.Until = time.Time{}
	h.Length = 0
	return h
}

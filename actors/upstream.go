package actors

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// outcomeQueue is how many outcome messages may wait for an actor before a
// query's send blocks. Recording is a few hundred nanoseconds, so a queue
// this deep only fills if the actor is starved of CPU; then queries wait a
// moment rather than lose evidence.
const outcomeQueue = 1024

// message is what the query path tells an upstream's actor. It is passed by
// value so that sending one allocates nothing.
type message struct {
	outcome Outcome       // a recorded outcome (answer, expired or peer fault), or a local error (Pool.LocalError)
	at      time.Time     // when the attempt ended
	dur     time.Duration // how long it took: an answer's is a round-trip sample
	err     error         // the failure, for /api/health
	done    chan struct{} // a barrier instead of an outcome: closed once every earlier message is applied
	stop    bool          // the actor's last message
	loop    uint32        // instead of an outcome: this loop check came back (its sequence number)
	recheck recheck       // instead of an outcome: check for a loop now
}

// Upstream is one upstream of the pool: its transport, its slots and its
// health. Its actor goroutine owns the health and the probes; queries take
// and return slots on their own goroutines and send the actor what they
// observed.
type Upstream struct {
	Name      string
	Address   string
	transport transport.Exchanger // always non-nil

	// slots is the counting semaphore of in-flight exchanges: a token in
	// the channel is a held permit. Capacity is the configured slots.
	// Probes take none (see probe.go).
	slots chan struct{}

	// state is what the query path reads, an Eligibility: published by
	// the actor whenever it changes (the breaker opens or closes, a loop
	// is found or gone), so an answered query on a healthy upstream
	// publishes nothing.
	state atomic.Uint32

	// peers are the upstreams of the pool this one serves, itself
	// included, for the all-down rule; set by the pool (bind). Nil before:
	// the rule is then never applied (the backoff always doubles).
	peers atomic.Pointer[[]*Upstream]

	inbox chan message
	quit  chan struct{}
	done  chan struct{}

	// Loop checks (loop.go). loops and loopID are fixed at creation;
	// checkSeq and lastCheck are written by the probe goroutine before
	// each check it sends and read by the query path; checkBack is
	// written by the query path when a check of ours comes back; loopSeq
	// is the actor's own.
	loops     *Loops // or nil: no checks
	loopID    uint32
	checkSeq  atomic.Uint32             // the last check sent; 0 before one
	lastCheck atomic.Pointer[sentCheck] // the last check sent, as a name that comes back is held to it; nil before one
	checkBack atomic.Uint32             // the last check that came back; 0 before one
	loopSeq   uint32                    // the check whose return put the upstream in loop; 0 when none

	mu               sync.Mutex // guards following; taken by the actor and by Status, never on the query path
	policy           HealthPolicy
	health           Health              // written only by the actor, which may read it without mu
	rtt              RTT                 // from answered attempts and probes
	lastErr          error               // the last recorded failure's (attempt or probe)
	lastErrAt        time.Time           // when it happened
	lastLocalErr     error               // the last local error of an attempt or probe (network.go); nil before one
	lastLocalErrAt   time.Time           // when it happened
	lastRecordedAt   time.Time           // when an attempt or probe last ended with a recorded outcome: an answer or a failure
	probes           [numOutcomes]uint64 // probes by how they ended
	lastProbeAt      time.Time           // when the last probe ended; zero before one
	lastProbeOutcome Outcome
}

func newUpstream(name, address string, slots int, t transport.Exchanger, p HealthPolicy) *Upstream {
	u := &Upstream{
		Name:      name,
		Address:   address,
		transport: t,
		slots:     make(chan struct{}, slots),
		inbox:     make(chan message, outcomeQueue),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
		policy:    p,
		loops:     p.Loops,
	}
	if u.loops != nil {
		u.loopID = u.loops.register(u)
	}
	return u
}

// start starts u's actor. The pool calls it once u has its peers (bind):
// the start-up probe and its loop check weigh them.
func (u *Upstream) start() { go u.run() }

// run is the actor: it applies outcomes in the order queries sent them,
// and probes the upstream at start-up and whenever a backoff ends. The
// probes run on a goroutine of its own (at most one at a time), which run
// cancels and waits for before it returns.
func (u *Upstream) run() {
	defer close(u.done)
	pr := newProber()
	defer pr.close()
	if u.policyNow().ProbeTimeout > 0 {
		pr.start(u, probeStartup) // concurrently with the first queries: service is not delayed
	}
	for {
		select {
		case m := <-u.inbox:
			if m.stop {
				return
			}
			switch {
			case m.done != nil:
				close(m.done)
				continue
			case m.loop != 0:
				u.loopReported(m.loop, time.Now())
			case m.recheck != 0:
				pr.recheck(u, m.recheck)
			default:
				u.apply(m)
			}
			pr.schedule(u)
		case <-pr.c:
			pr.fired(u)
		case r := <-pr.results:
			pr.running = false
			u.applyProbe(r, pr.kind)
			pr.schedule(u)
			pr.pendingRecheck(u)
		}
	}
}

// policyNow is the health policy in force (a reload may change it).
func (u *Upstream) policyNow() HealthPolicy {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.policy
}

// apply records one attempt's outcome. A local error is only remembered,
// for the network's state: it is nobody's failure.
func (u *Upstream) apply(m message) {
	u.mu.Lock()
	if m.outcome == OutcomeLocalError {
		u.lastLocalErr, u.lastLocalErrAt = m.err, m.at
		u.mu.Unlock()
		return
	}
	u.lastRecordedAt = m.at
	h := u.health
	if m.outcome == OutcomeAnswer {
		h = h.Success()
		u.rtt = u.rtt.Sample(m.dur)
	} else {
		h = h.Failure(m.at, u.policy)
		u.lastErr, u.lastErrAt = m.err, m.at
	}
	old := u.health
	u.health = h
	u.mu.Unlock()
	u.publish(old, h)
}

// publish tells the query path about a change of eligibility.
func (u *Upstream) publish(old, h Health) {
	if e := h.At(); e != old.At() {
		u.state.Store(uint32(e))
	}
}

// eligibility reports what the dispatch may do with u. It reads the
// published state: no lock on the query path.
func (u *Upstream) eligibility() Eligibility { return Eligibility(u.state.Load()) }

// cutOff reports whether u's last word is a local error: its actor then
// probes it every backoff_ms (prober.schedule). Only the actor calls it.
func (u *Upstream) cutOff() bool { return u.lastLocalErrAt.After(u.lastRecordedAt) }

// outOfService reports whether u is in backoff or loops, from the
// published state.
func (u *Upstream) outOfService() bool { return u.eligibility() != Healthy }

// tryAcquire takes a slot if one is free, without blocking.
func (u *Upstream) tryAcquire() bool {
	select {
	case u.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// release returns a slot taken by tryAcquire or a blocking wait.
func (u *Upstream) release() { <-u.slots }

// record sends a recorded outcome to the actor. It never blocks past Close.
func (u *Upstream) record(m message) {
	// The inbox almost always has room: try the one-channel send first, a
	// cheaper operation than the two-case select below.
	select {
	case u.inbox <- m:
		return
	default:
	}
	select {
	case u.inbox <- m:
	case <-u.quit:
	}
}

// sync returns once the actor has applied every outcome sent before it.
func (u *Upstream) sync() {
	done := make(chan struct{})
	select {
	case u.inbox <- message{done: done}:
	case <-u.quit:
		return
	}
	select {
	case <-done:
	case <-u.quit:
	}
}

// stop ends the actor. Senders racing with it see quit closed and give up
// instead of blocking on an inbox nobody drains.
func (u *Upstream) stop() {
	close(u.quit)
	u.inbox <- message{stop: true}
	<-u.done
	if u.loops != nil {
		u.loops.unregister(u.loopID)
	}
}

// Status is one upstream's state as /api/health and the metrics show it.
type Status struct {
	Name                string
	Address             string
	InBackoff           bool // in backoff, or looping
	Loop                bool // a loop check came back through it: out of service until a check no longer loops (LastError says so)
	Slots               int
	InFlight            int
	Successes           uint64 // recorded answers of attempts; probes are not counted
	Failures            uint64 // recorded failures of attempts; probes are not counted
	ConsecutiveFailures int
	BackoffUntil        time.Time // zero when healthy; when the next probe (or loop check) is due (or was: one may be running)
	LastError           error     // nil when none yet
	LastErrorAt         time.Time
	RTT                 RTT                 // from answered attempts and probes; RTT.Samples 0 before the first
	Probes              [numOutcomes]uint64 // probes by how they ended, indexed by Outcome
	LastProbeAt         time.Time           // when the last probe ended; zero before one
	LastProbeOutcome    Outcome             // how it ended
	LastLocalError      error               // the last local error (no route, no sockets) of an attempt or probe, recorded against nobody; nil before one
	LastLocalErrorAt    time.Time           // when it happened
	LastRecordedAt      time.Time           // when an attempt or probe last ended with a recorded outcome (an answer or a failure); zero before one
}

func (u *Upstream) status() Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	return Status{
		Name:                u.Name,
		Address:             u.Address,
		InBackoff:           u.health.InBackoff,
		Loop:                u.health.Loop,
		Slots:               cap(u.slots),
		InFlight:            len(u.slots),
		Successes:           u.health.Successes,
		Failures:            u.health.Failures,
		ConsecutiveFailures: u.health.Consecutive,
		BackoffUntil:        u.health.Until,
		LastError:           u.lastErr,
		LastErrorAt:         u.lastErrAt,
		RTT:                 u.rtt,
		Probes:              u.probes,
		LastProbeAt:         u.lastProbeAt,
		LastProbeOutcome:    u.lastProbeOutcome,
		LastLocalError:      u.lastLocalErr,
		LastLocalErrorAt:    u.lastLocalErrAt,
		LastRecordedAt:      u.lastRecordedAt,
	}
}

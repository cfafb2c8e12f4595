package actors

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nxdnsd/nxdnsd/wire"
)

// outcomeQueue is how many outcome messages may wait for an actor before a
// query's send blocks. Recording is a few hundred nanoseconds, so a queue
// this deep only fills if the actor is starved of CPU; then queries wait a
// moment rather than lose evidence.
const outcomeQueue = 1024

// message is what the query path tells an upstream's actor. It is passed by
// value so that sending one allocates nothing.
type message struct {
	outcome Outcome       // a recorded outcome: answer, expired or peer fault
	at      time.Time     // when the attempt ended
	probe   bool          // the attempt was a half-open trial or a pass-two probe
	trial   bool          // the attempt held the half-open trial token
	err     error         // the failure, for /api/health
	done    chan struct{} // a barrier instead of an outcome: closed once every earlier message is applied
	stop    bool          // the actor's last message
}

// view is the part of the health state the query path reads. The actor
// publishes a new one only when eligibility can change (the breaker opens,
// re-arms or closes), so an answered query on a healthy upstream publishes
// nothing and allocates nothing.
type view struct {
	inBackoff bool
	until     time.Time
}

// Upstream is one upstream of the pool: its transport, its slots and its
// health. Its actor goroutine owns the health; queries take and return slots
// on their own goroutines and send the actor what they observed.
type Upstream struct {
	Name      string
	Address   string
	transport wire.Exchanger // always non-nil

	// slots is the counting semaphore of in-flight exchanges: a token in
	// the channel is a held permit. Capacity is the configured slots.
	slots chan struct{}

	// trial is the half-open trial token: set by the one query that takes
	// the trial, cleared by the actor once that trial's outcome is applied,
	// or by the query itself when its outcome is not recorded.
	trial atomic.Bool

	cur atomic.Pointer[view] // published by the actor; never nil

	inbox chan message
	quit  chan struct{}
	done  chan struct{}

	policy HealthPolicy

	mu        sync.Mutex // guards following; taken by the actor and by Status, never on the query path
	health    Health
	lastErr   error
	lastErrAt time.Time
}

func newUpstream(name, address string, slots int, t wire.Exchanger, p HealthPolicy) *Upstream {
	u := &Upstream{
		Name:      name,
		Address:   address,
		transport: t,
		slots:     make(chan struct{}, slots),
		inbox:     make(chan message, outcomeQueue),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
		policy:    p,
	}
	u.cur.Store(&view{})
	go u.run()
	return u
}

// run is the actor: it applies outcomes in the order queries sent them.
// It receives from its inbox alone (a one-channel receive is cheaper than
// a select on every outcome); stop sends it a message with stop set.
func (u *Upstream) run() {
	defer close(u.done)
	for m := range u.inbox {
		if m.stop {
			return
		}
		u.apply(m)
	}
}

func (u *Upstream) apply(m message) {
	if m.done != nil {
		close(m.done)
		return
	}
	u.mu.Lock()
	h := u.health
	if m.outcome == OutcomeAnswer {
		h = h.Success()
	} else {
		h = h.Failure(m.at, m.probe, u.policy)
		u.lastErr, u.lastErrAt = m.err, m.at
	}
	old := u.health
	u.health = h
	u.mu.Unlock()

	if h.InBackoff != old.InBackoff || !h.Until.Equal(old.Until) {
		u.cur.Store(&view{inBackoff: h.InBackoff, until: h.Until})
	}
	// The trial ends only after the new view is out, so no query can see
	// the old half-open view with the token free.
	if m.trial {
		u.trial.Store(false)
	}
}

// eligibility reports what the dispatch may do with u at now. It reads
// the published view: no lock on the query path.
func (u *Upstream) eligibility(now time.Time) Eligibility {
	v := u.cur.Load()
	return eligibility(v.inBackoff, v.until, now)
}

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
}

// Status is one upstream's state as /api/health and the metrics show it.
type Status struct {
	Name                string
	Address             string
	InBackoff           bool // open or half-open
	Slots               int
	InFlight            int
	Successes           uint64
	Failures            uint64
	ConsecutiveFailures int
	BackoffUntil        time.Time // zero when healthy
	LastError           error     // nil when none yet
	LastErrorAt         time.Time
}

func (u *Upstream) status() Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	return Status{
		Name:                u.Name,
		Address:             u.Address,
		InBackoff:           u.health.InBackoff,
		Slots:               cap(u.slots),
		InFlight:            len(u.slots),
		Successes:           u.health.Successes,
		Failures:            u.health.Failures,
		ConsecutiveFailures: u.health.Consecutive,
		BackoffUntil:        u.health.Until,
		LastError:           u.lastErr,
		LastErrorAt:         u.lastErrAt,
	}
}

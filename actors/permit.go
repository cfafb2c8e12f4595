package actors

import "time"

// permit is a query's hold on one upstream for one attempt: a slot. It
// lives on the dispatch's stack; release, deferred once where the permit
// is taken, gives the slot back on every path, a panicking transport's
// included. Slots are conserved by construction: nothing else returns
// them.
type permit struct {
	u       *Upstream
	c       *clientShare // the query's client, whose held count includes the slot; nil: not counted
	i       int          // u's index in the pool
	passTwo bool         // a pass-two attempt: u may be in backoff
	slot    bool         // a slot of u's is held
}

// hold notes a slot just taken on p.u as held, and counts it as the
// client's.
func (p *permit) hold() {
	p.slot = true
	if p.c != nil {
		p.c.add(1, 0)
	}
}

// releaseSlot returns the slot, once: when the transport has returned, or
// when the attempt does not start.
func (p *permit) releaseSlot() {
	if p.slot {
		p.slot = false
		if p.c != nil {
			p.c.add(-1, 0)
		}
		p.u.release()
	}
}

// release gives back the slot if it is still held. It is idempotent.
func (p *permit) release() { p.releaseSlot() }

// attempt is one exchange's budget: when it started, when it expires, and
// whether that expiry was cut short by the query's deadline (a truncated
// attempt, whose expiry is censored).
type attempt struct {
	start     time.Time
	expiry    time.Time // min(start + AttemptTimeout, D)
	truncated bool      // start + AttemptTimeout is after D
}

// expired reports whether an attempt that ended at end with err ran out
// of its budget rather than completing: the transport returned no answer
// and the expiry had passed.
func (a attempt) expired(end time.Time, err error) bool {
	return err != nil && !end.Before(a.expiry)
}

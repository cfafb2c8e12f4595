package actors

import (
	"context"
	"errors"
	"math/bits"
	"time"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Exchange resolves q through the pool under one deadline,
// D = arrival + TotalTimeout (arrival: when the client's query arrived, as
// read by the caller), following spec section 4: a non-blocking sweep in
// priority order, failover after peer faults, a blocking wait on every
// saturated eligible upstream at once only when none has a free slot, and a
// second pass that tries backed-off upstreams when nothing else answered.
// While other clients are active, a query whose client (q.Client) holds its
// share of the slots takes only a slot beyond the few kept for them, and
// never waits: it ends ErrShareRefused instead (share.go).
// It runs on the caller's goroutine. No client query is an upstream's
// half-open trial: a backed-off upstream is left to its actor's probes,
// and pass one never touches it. A looping upstream (loop.go) is touched
// by neither pass.
//
// trail is a buffer for the attempt trail (it may be nil); Result.Attempts
// is trail[:0] with every attempt appended, so a caller that passes a stack
// array's slice pays no allocation for it.
//
// q.Msg is never modified; the transports write their wire IDs into
// q.Packed and may put the answer's bytes in q.Buf. Exchange never returns
// before every permit it took is returned.
func (p *Pool) Exchange(ctx context.Context, q *transport.Query, arrival time.Time, trail []Attempt) Result {
	return p.exchange(ctx, q, arrival, trail, ^uint64(0))
}

// ExchangeOnly is Exchange over the upstreams whose pool index is set in
// only (bit i for Upstream(i)): the others are never tried, as if each
// had been tried already. The query path sends the reverse names of
// private addresses to the pool's router upstreams this way (spec section
// 15): they never reach a public resolver. With none of them eligible it
// ends as Exchange does when every upstream failed.
func (p *Pool) ExchangeOnly(ctx context.Context, q *transport.Query, arrival time.Time, trail []Attempt, only uint64) Result {
	return p.exchange(ctx, q, arrival, trail, only)
}

func (p *Pool) exchange(ctx context.Context, q *transport.Query, arrival time.Time, trail []Attempt, only uint64) Result {
	var c *clientShare // nil for a query of nxdnsd's own: no share, counted nowhere
	if q.Client.IsValid() {
		c = p.shares.client(q.Client)
		p.shares.arrive(c, arrival)
	}
	d := dispatch{
		pool:     p,
		ctx:      ctx,
		q:        q,
		client:   c,
		deadline: arrival.Add(p.policy.TotalTimeout),
		now:      arrival,
		tried:    ^only, // the others count as tried: neither pass touches them
		res:      Result{Attempts: trail[:0]},
	}
	d.run()
	switch {
	case errors.Is(d.res.Err, ErrBudgetExhausted):
		p.budgetExhausted.Add(1)
	case d.res.Err == ErrShareRefused:
		p.shareRefused.Add(1)
	}
	return d.res
}

// dispatch is one query's walk through the pool. It lives on the query's
// stack and is touched by no other goroutine.
type dispatch struct {
	pool     *Pool
	ctx      context.Context
	q        *transport.Query
	client   *clientShare // the counters of q.Client's share (share.go); nil for nxdnsd's own query
	deadline time.Time    // D
	// now is the clock as last read: at the query's arrival, at the end of
	// an attempt or of a slot wait. A slot wait starts its count from it;
	// an attempt reads the clock afresh before it starts (begin).
	now     time.Time
	tried   uint64 // upstreams attempted: each at most once per query
	skipped uint64 // upstreams skipped for backoff in pass one: pass two's candidates
	passTwo bool
	// noRoute is the last local error after which the query failed over
	// (no route to that upstream): the query's error if nothing else is
	// learnt, so that the client hears the failure was local (EDE 23).
	noRoute error
	res     Result
}

func (d *dispatch) run() {
	if err := d.ctx.Err(); err != nil {
		d.res.Err = err
		return
	}
	// Pass one: eligible upstreams, in priority order among those that can
	// take the query now.
	for {
		if d.refused(toTake) {
			d.res.Err = ErrShareRefused
			return
		}
		p, ok := d.sweep()
		if !ok {
			waitable := d.saturated()
			if waitable == 0 {
				break
			}
			if d.refused(toWait) {
				d.res.Err = ErrShareRefused
				return
			}
			var err error
			if p, err = d.wait(waitable); err != nil {
				d.res.Err = err
				return
			}
		}
		if over := d.attempt(&p); over {
			return
		}
	}
	// Pass two: try what pass one skipped for backoff, in order, each
	// admission blocking but bounded by the same deadline (spec section 4,
	// step 6). Nothing else answered, so this costs the client nothing it
	// still had.
	d.passTwo = true
	for m := d.skipped &^ d.tried; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		u := d.pool.upstreams[i]
		p := permit{u: u, c: d.client, i: i, passTwo: true}
		if u.tryAcquire() {
			p.hold()
		} else if w, err := d.wait(1 << i); err == nil {
			p = w
			p.passTwo = true
		} else {
			p.release()
			d.res.Err = err
			return
		}
		if over := d.attempt(&p); over {
			return
		}
	}
	d.res.Err = ErrAllFailed
	if d.noRoute != nil && d.res.Upstream == "" {
		// Nothing recorded against any upstream, and at least one had no
		// route: the failure was local.
		d.res.Err = d.noRoute
	}
}

// sweep takes a slot, without blocking, on the first eligible untried
// upstream in priority order that has one, and returns the permit. A
// saturated upstream is passed over while another has capacity; the next
// sweep tries it again.
func (d *dispatch) sweep() (permit, bool) {
	for i, u := range d.pool.upstreams {
		bit := uint64(1) << i
		if d.tried&bit != 0 {
			continue
		}
		switch u.eligibility() {
		case Healthy:
			if u.tryAcquire() {
				p := permit{u: u, c: d.client, i: i}
				p.hold()
				return p, true
			}
		case BackedOff:
			d.skipped |= bit
		case Looping:
			// Out of service: not even pass two tries it.
		}
	}
	return permit{}, false
}

// Where a query stands when the client share rule (share.go) is applied.
const (
	toTake  = iota // about to sweep for a free slot
	toWait         // about to wait for one
	waiting        // woken while waiting (a kick)
)

// refused applies the client share rule (share.go) at step (toTake,
// toWait, waiting) and reports whether the query is refused. A client
// alone costs it two atomic loads.
func (d *dispatch) refused(step int) bool {
	if d.client == nil {
		return false
	}
	n := d.pool.shares.clients(d.now)
	if n == 1 {
		return false
	}
	st := d.pool.standing(d.client, n)
	switch step {
	case toTake:
		return st.held >= st.share && (st.rivals || st.free <= st.reserve)
	case toWait:
		// Its waiting queries will hold slots too: they count.
		return st.held+st.waiting >= st.share
	default:
		return st.held+st.waiting-1 >= st.share // itself among the waiting
	}
}

// saturated returns the untried healthy upstreams: the ones a blocked
// query may wait on.
func (d *dispatch) saturated() uint64 {
	var m uint64
	for i, u := range d.pool.upstreams {
		if d.tried&(1<<i) == 0 && u.eligibility() == Healthy {
			m |= 1 << i
		}
	}
	return m
}

// attempt runs one exchange on p, which holds a slot, and applies the
// classification table of spec section 4. Whatever happens, p is released
// before it returns. It reports whether the query is over.
func (d *dispatch) attempt(p *permit) (over bool) {
	defer p.release()
	a, ok, over := d.begin(p)
	if !ok {
		return over
	}
	ans, err := p.u.transport.Exchange(d.ctx, d.q, a.expiry)
	end := time.Now()
	d.now = end
	p.releaseSlot()
	return d.settle(p, a, end, ans, err)
}

// begin is an attempt's head, at a fresh reading of the clock (spec
// section 4, steps 4 and 5): the post-admission health recheck and the last
// deadline check. With ok it returns the attempt's budget. Otherwise the
// attempt does not start, and over says whether the query is over.
func (d *dispatch) begin(p *permit) (a attempt, ok, over bool) {
	u := p.u
	a.start = time.Now()
	d.now = a.start
	if e := u.eligibility(); e == Looping || !p.passTwo && e != Healthy {
		// It entered backoff while we waited: the slot goes back, the
		// sweep moves on, and pass two may try it. A loop found while
		// we waited takes it out of both passes.
		if e == BackedOff {
			d.skipped |= 1 << p.i
		}
		return a, false, false
	}
	d.tried |= 1 << p.i
	if !a.start.Before(d.deadline) {
		// No attempt after the deadline: an instant transport must not
		// manufacture evidence once the budget is gone.
		d.res.Err = ErrBudgetExhausted
		return a, false, true
	}
	a.expiry = a.start.Add(d.pool.policy.AttemptTimeout)
	a.truncated = a.expiry.After(d.deadline)
	if a.truncated {
		a.expiry = d.deadline
	}
	return a, true, false
}

// settle is an attempt's tail, once the transport has returned (ans, err)
// at end and the slot is back: the classification table of spec section 4,
// the trail, the observer, the health record and the attribution. It
// reports whether the query is over.
func (d *dispatch) settle(p *permit, a attempt, end time.Time, ans transport.Answer, err error) (over bool) {
	var outcome Outcome
	switch {
	case err == nil:
		outcome, d.res.Err, over = OutcomeAnswer, nil, true
		d.res.Answer = ans
	case d.ctx.Err() != nil:
		// The query's caller gave up (cancelled, or a deadline of its
		// own): nothing is said about the upstream.
		outcome, d.res.Err, over = OutcomeCanceled, d.ctx.Err(), true
	case a.expired(end, err) && a.truncated:
		// Censored: the pool did not grant the full interval, so this says
		// nothing about the upstream.
		outcome, d.res.Err, over = OutcomeCensored, ErrBudgetExhausted, true
	case a.expired(end, err):
		outcome = OutcomeExpired
	default:
		switch Classify(err) {
		case GroupPeerFault:
			outcome = OutcomePeerFault
		case GroupLocalResource:
			outcome = OutcomeLocalError
			if NoRoute(err) {
				d.noRoute = err // a dead link, not a dead upstream: fail over
			} else {
				d.res.Err, over = err, true
			}
		case GroupCanceled:
			outcome, d.res.Err, over = OutcomeCanceled, context.Canceled, true
		case GroupBudgetExhausted:
			outcome, d.res.Err, over = OutcomeCensored, ErrBudgetExhausted, true
		}
	}

	dur := end.Sub(a.start)
	d.res.Attempts = append(d.res.Attempts, Attempt{Upstream: p.u.Name, Outcome: outcome, Duration: dur, Err: err})
	if d.pool.observer != nil {
		d.pool.observer.ObserveAttempt(p.i, outcome, dur)
	}
	if outcome.Recorded() {
		d.res.Upstream = p.u.Name // attribution: only after an outcome is recorded
		p.u.record(message{outcome: outcome, at: end, dur: dur, err: err})
	}
	return over
}

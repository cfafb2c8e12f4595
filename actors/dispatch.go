package actors

import (
	"context"
	"errors"
	"math/bits"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire"
)

// Exchange resolves q through the pool under one deadline,
// D = arrival + TotalTimeout (arrival: when Exchange is called, or a
// WireQuery's Arrival), following spec section 4: a non-blocking sweep in
// priority order, failover after peer faults, a blocking wait on every
// saturated eligible upstream at once only when none has a free slot, and a
// second pass that probes backed-off upstreams. It runs on the caller's
// goroutine.
//
// trail is a buffer for the attempt trail (it may be nil); Result.Attempts
// is trail[:0] with every attempt appended, so a caller that passes a stack
// array's slice pays no allocation for it.
//
// q is never modified. Exchange never returns before every permit it took
// is returned.
func (p *Pool) Exchange(ctx context.Context, q *dns.Msg, trail []Attempt) Result {
	return p.exchange(ctx, q, nil, trail)
}

// ExchangeWire is Exchange on the byte path: upstreams whose transport is a
// wire.RawExchanger are sent q.Packed and may answer with bytes in q.Buf
// (Result.Raw); the others exchange q.Msg. The deadline counts from
// q.Arrival when it is set. Everything else, the order, the classification
// and the attribution, is Exchange's.
func (p *Pool) ExchangeWire(ctx context.Context, q *wire.WireQuery, trail []Attempt) Result {
	return p.exchange(ctx, q.Msg, q, trail)
}

func (p *Pool) exchange(ctx context.Context, q *dns.Msg, wq *wire.WireQuery, trail []Attempt) Result {
	now := time.Now()
	arrival := now
	if wq != nil && !wq.Arrival.IsZero() {
		arrival = wq.Arrival
	}
	d := dispatch{
		pool:     p,
		ctx:      ctx,
		q:        q,
		wq:       wq,
		deadline: arrival.Add(p.policy.TotalTimeout),
		now:      now,
		res:      Result{Upstream: -1, Attempts: trail[:0]},
	}
	d.run()
	if errors.Is(d.res.Err, ErrBudgetExhausted) {
		p.budgetExhausted.Add(1)
	}
	return d.res
}

// dispatch is one query's walk through the pool. It lives on the query's
// stack and is touched by no other goroutine.
type dispatch struct {
	pool     *Pool
	ctx      context.Context
	q        *dns.Msg
	wq       *wire.WireQuery // the byte path's query, or nil
	deadline time.Time
	// now is the clock as last read, which is after the last step that
	// could block (the call, a slot wait, an attempt): the steps in
	// between only take slots without blocking and read health, so they
	// share it, and a query that is answered at once reads the clock
	// twice, when it enters the pool and when its attempt ends.
	now     time.Time
	tried   uint64 // upstreams attempted: each at most once per query
	skipped uint64 // upstreams skipped for backoff in pass one: pass two's probes
	passTwo bool
	res     Result
}

func (d *dispatch) run() {
	if d.ctx.Err() != nil {
		d.res.Err = context.Canceled
		return
	}
	// Pass one: eligible upstreams, in priority order among those that can
	// take the query now.
	for {
		i, trial, ok := d.sweep()
		if !ok {
			waitable := d.saturated()
			if waitable == 0 {
				break
			}
			var err error
			if i, err = d.wait(waitable); err != nil {
				d.res.Err = err
				return
			}
		}
		if over := d.attempt(i, trial, trial); over {
			return
		}
	}
	// Pass two: probe what pass one skipped for backoff, in order, each
	// admission blocking but bounded by the same deadline.
	d.passTwo = true
	for m := d.skipped &^ d.tried; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		u := d.pool.upstreams[i]
		trial := false
		if u.eligibility(d.now) == HalfOpen {
			// A half-open upstream belongs to its one trial query.
			if !u.trial.CompareAndSwap(false, true) {
				continue
			}
			trial = true
		}
		if !u.tryAcquire() {
			if _, err := d.wait(1 << i); err != nil {
				if trial {
					u.trial.Store(false)
				}
				d.res.Err = err
				return
			}
		}
		if over := d.attempt(i, true, trial); over {
			return
		}
	}
	d.res.Err = ErrAllFailed
}

// sweep takes a slot, without blocking, on the first eligible untried
// upstream in priority order that has one, and reports it. A saturated
// upstream is passed over while another has capacity; the next sweep tries
// it again. trial says the query holds the upstream's half-open trial.
func (d *dispatch) sweep() (i int, trial, ok bool) {
	now := d.now
	for i, u := range d.pool.upstreams {
		bit := uint64(1) << i
		if d.tried&bit != 0 {
			continue
		}
		switch u.eligibility(now) {
		case Healthy:
			if u.tryAcquire() {
				return i, false, true
			}
		case HalfOpen:
			if !u.trial.CompareAndSwap(false, true) {
				continue // another query is the trial: ineligible for this one
			}
			if u.tryAcquire() {
				return i, true, true
			}
			u.trial.Store(false)
			d.skipped |= bit
		case BackedOff:
			d.skipped |= bit
		}
	}
	return -1, false, false
}

// saturated returns the untried upstreams that are eligible without a
// trial: the ones a blocked query may wait on.
func (d *dispatch) saturated() uint64 {
	now := d.now
	var m uint64
	for i, u := range d.pool.upstreams {
		if d.tried&(1<<i) == 0 && u.eligibility(now) == Healthy {
			m |= 1 << i
		}
	}
	return m
}

// attempt runs one exchange with upstream i, whose slot the query holds,
// and applies the classification table of spec section 4. It returns the
// slot (and the trial token when the outcome is not recorded) on every
// path, and reports whether the query is over.
func (d *dispatch) attempt(i int, probe, trial bool) (over bool) {
	start, expiry, truncated, ok, over := d.begin(i, probe, trial)
	if !ok {
		return over
	}
	u := d.pool.upstreams[i]
	actx := newAttemptCtx(d.ctx, expiry)
	defer actx.stop()
	released := false
	defer func() {
		if !released {
			// The transport panicked. The listener recovers the panic and
			// answers SERVFAIL; the permit and the trial must not go with
			// it, or the upstream would lose a slot for good.
			u.release()
			if trial {
				u.trial.Store(false)
			}
		}
	}()
	var ans wire.Answer
	var err error
	if d.wq != nil && u.raw != nil {
		ans, err = u.raw.ExchangeRaw(actx, d.wq)
	} else {
		ans.Msg, err = u.transport.Exchange(actx, d.q)
	}
	end := time.Now()
	d.now = end
	expired := err != nil && (actx.Err() == context.DeadlineExceeded || !end.Before(expiry))
	u.release()
	released = true
	return d.settle(i, probe, trial, start, end, truncated, expired, ans, err)
}

// begin is an attempt's head: the post-admission health recheck and the
// last deadline check, both at d.now, the clock as read after the last step
// that could block (nothing that waits happens in between). With ok it returns the attempt's start and expiry, the expiry
// truncated to the query's deadline when that comes first. Otherwise the
// slot (and the trial) went back, and over says whether the query is over.
func (d *dispatch) begin(i int, probe, trial bool) (start, expiry time.Time, truncated, ok, over bool) {
	u := d.pool.upstreams[i]
	d.tried |= 1 << i

	start = d.now
	el := u.eligibility(start)
	if !probe && el != Healthy || trial && !d.passTwo && el == BackedOff {
		// It entered backoff while we waited: give the slot back, let the
		// sweep move on, and leave it to pass two.
		u.release()
		if trial {
			u.trial.Store(false)
		}
		d.tried &^= 1 << i
		d.skipped |= 1 << i
		return start, expiry, false, false, false
	}
	if !start.Before(d.deadline) {
		// No attempt after the deadline: an instant transport must not
		// manufacture evidence once the budget is gone.
		u.release()
		if trial {
			u.trial.Store(false)
		}
		d.res.Err = ErrBudgetExhausted
		return start, expiry, false, false, true
	}
	expiry = start.Add(d.pool.policy.AttemptTimeout)
	truncated = expiry.After(d.deadline)
	if truncated {
		expiry = d.deadline
	}
	return start, expiry, truncated, true, false
}

// settle is an attempt's tail, once the transport has returned (ans, err)
// at end and the slot is back: the classification table of spec section 4,
// the trail, the observer, the health record and the attribution. It
// reports whether the query is over.
func (d *dispatch) settle(i int, probe, trial bool, start, end time.Time, truncated, expired bool, ans wire.Answer, err error) (over bool) {
	u := d.pool.upstreams[i]
	var outcome Outcome
	switch {
	case err == nil:
		outcome, d.res.Err, over = OutcomeAnswer, nil, true
		d.res.Msg, d.res.Raw, d.res.Layout = ans.Msg, ans.Raw, ans.Layout
	case d.ctx.Err() != nil:
		outcome, d.res.Err, over = OutcomeCanceled, context.Canceled, true
	case expired && truncated:
		// Censored: the pool did not grant the full interval, so this says
		// nothing about the upstream.
		outcome, d.res.Err, over = OutcomeCensored, ErrBudgetExhausted, true
	case expired:
		outcome = OutcomeExpired
	default:
		switch Classify(err) {
		case GroupPeerFault:
			outcome = OutcomePeerFault
		case GroupLocalResource:
			outcome, d.res.Err, over = OutcomeLocalError, err, true
		case GroupCanceled:
			outcome, d.res.Err, over = OutcomeCanceled, context.Canceled, true
		case GroupBudgetExhausted:
			outcome, d.res.Err, over = OutcomeCensored, ErrBudgetExhausted, true
		}
	}

	dur := end.Sub(start)
	d.res.Attempts = append(d.res.Attempts, Attempt{Upstream: i, Outcome: outcome, Duration: dur, Err: err})
	if d.pool.observer != nil {
		d.pool.observer.ObserveAttempt(i, outcome, dur)
	}
	if outcome.Recorded() {
		d.res.Upstream = i // attribution: only after an outcome is recorded
		u.record(message{outcome: outcome, at: end, probe: probe, trial: trial, err: err})
	} else if trial {
		u.trial.Store(false) // hand the trial to the next query
	}
	return over
}

// Package actors is nxdnsd's upstream pool: one actor per upstream owning
// its slots and health, and a per-query dispatch that runs on the query's
// own goroutine under one deadline.
package actors

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nxdnsd/nxdnsd/internal/timerpool"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// MaxUpstreams is the most upstreams one pool holds: the dispatch keeps the
// set of tried upstreams in a 64-bit mask. Configuration validation refuses
// more enabled upstreams, so a valid configuration never reaches the limit.
const MaxUpstreams = 64

var (
	// ErrBudgetExhausted: the query's deadline passed in the pool.
	ErrBudgetExhausted = errors.New("budget exhausted")

	// ErrAllFailed: every upstream the query could try failed before its
	// deadline (or none could be tried at all).
	ErrAllFailed = errors.New("every upstream failed")

	// ErrShareRefused: the query's client held its share of the slots or
	// more while other clients were active, and no slot was free beyond
	// the reserve kept for them (share.go). Nothing is said about any
	// upstream, and it is not BudgetExhausted.
	ErrShareRefused = errors.New("the client's share of upstream slots is taken")
)

// Policy is the pool's budget and health configuration.
type Policy struct {
	AttemptTimeout time.Duration // the observation interval one attempt is granted
	TotalTimeout   time.Duration // one query's whole budget, admission included
	Health         HealthPolicy
}

// Spec describes one upstream of a new pool. Order is priority.
type Spec struct {
	Name      string
	Address   string
	Slots     int
	Transport transport.Exchanger // always non-nil
}

// Observer hears about every attempt, for metrics. Its method is called on
// the query's goroutine and must be cheap and safe for concurrent use.
type Observer interface {
	ObserveAttempt(upstream int, o Outcome, d time.Duration)
}

// Pool dispatches queries to its upstreams.
type Pool struct {
	policy    Policy
	upstreams []*Upstream // by priority; fixed after NewPool
	observer  Observer    // or nil
	shares    *shares     // the clients' shares of the slots; always non-nil

	budgetExhausted atomic.Uint64 // queries that ended BudgetExhausted, once each
	shareRefused    atomic.Uint64 // queries refused for their client's share of the slots
	queued          atomic.Uint64 // blocking slot waits entered, however they ended
	queuedNanos     atomic.Int64  // time spent in those waits

	// timers serve blocking waits: under a burst most queries wait, and a
	// fresh timer each was most of a queued query's garbage.
	timers timerpool.Pool

	closeOnce sync.Once
}

// NewPool starts one actor per upstream. Close stops them.
func NewPool(p Policy, specs []Spec, obs Observer) (*Pool, error) {
	switch {
	case len(specs) == 0:
		return nil, errors.New("pool: no upstreams")
	case len(specs) > MaxUpstreams:
		return nil, fmt.Errorf("pool: %d upstreams, at most %d", len(specs), MaxUpstreams)
	case p.AttemptTimeout <= 0 || p.TotalTimeout < p.AttemptTimeout:
		return nil, fmt.Errorf("pool: timeouts attempt=%v total=%v", p.AttemptTimeout, p.TotalTimeout)
	case p.Health.FailureThreshold < 1 || p.Health.Backoff <= 0 || p.Health.BackoffMax < p.Health.Backoff || p.Health.ProbeTimeout < 0:
		return nil, fmt.Errorf("pool: health policy %+v", p.Health)
	}
	for i, s := range specs {
		if s.Slots < 1 || s.Transport == nil {
			return nil, fmt.Errorf("pool: upstream %d (%s): slots=%d transport=%v", i, s.Name, s.Slots, s.Transport)
		}
	}
	pool := &Pool{policy: p, observer: obs, shares: newShares()}
	for _, s := range specs {
		pool.upstreams = append(pool.upstreams, newUpstream(s.Name, s.Address, s.Slots, s.Transport, p.Health))
	}
	pool.bind()
	for _, u := range pool.upstreams {
		u.start()
	}
	return pool, nil
}

// bind makes p's upstreams the peers each of them weighs for the all-down
// rule (every enabled upstream in backoff: probes keep backoff_ms). A
// pool that takes over upstreams of another calls it too, so that kept
// upstreams weigh their new peers.
func (p *Pool) bind() {
	ups := p.upstreams
	for _, u := range ups {
		u.peers.Store(&ups)
	}
}

// Close stops every actor, cancelling the probes in flight. Queries must
// have returned before Close is called; no goroutine of the pool outlives
// it.
func (p *Pool) Close() {
	p.closeOnce.Do(func() {
		p.shares.close()
		for _, u := range p.upstreams {
			u.stop()
		}
	})
}

// Len returns the number of upstreams.
func (p *Pool) Len() int { return len(p.upstreams) }

// Name returns upstream i's name.
func (p *Pool) Name(i int) string { return p.upstreams[i].Name }

// Status returns every upstream's state, in priority order.
func (p *Pool) Status() []Status {
	out := make([]Status, len(p.upstreams))
	for i, u := range p.upstreams {
		out[i] = u.status()
	}
	return out
}

// AllInBackoff reports whether every upstream is in backoff (or loops): the answer
// cache then serves a stale answer at once. It reads the published flags
// only: a few atomic loads.
func (p *Pool) AllInBackoff() bool {
	for _, u := range p.upstreams {
		if !u.outOfService() {
			return false
		}
	}
	return true
}

// BudgetExhaustedTotal counts queries that ended BudgetExhausted.
func (p *Pool) BudgetExhaustedTotal() uint64 { return p.budgetExhausted.Load() }

// ShareRefusedTotal counts queries refused for their client's share of
// the slots (ErrShareRefused).
func (p *Pool) ShareRefusedTotal() uint64 { return p.shareRefused.Load() }

// QueuedTotal counts blocking slot waits, however they ended.
func (p *Pool) QueuedTotal() uint64 { return p.queued.Load() }

// QueuedSeconds is the time spent in blocking slot waits.
func (p *Pool) QueuedSeconds() float64 {
	return time.Duration(p.queuedNanos.Load()).Seconds()
}

// Sync returns once every actor has applied every outcome sent before the
// call, so a Status taken afterwards reflects every query that had returned
// from Exchange by then. The metrics scrape and /api/health call it first:
// an operator who saw an answer never reads counts from before it. It costs
// one message per upstream and returns at once after Close.
func (p *Pool) Sync() { p.sync() }

// sync returns once every actor has applied every outcome sent so far.
func (p *Pool) sync() {
	for _, u := range p.upstreams {
		u.sync()
	}
}

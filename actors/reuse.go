package actors

import (
	"errors"
	"fmt"
)

// Handing upstreams from one pool to the next, for a configuration reload
// (spec section 9): an upstream whose name, address, ip, ca_file and slots
// are unchanged keeps its actor, and with it its health, counters, slots
// and transport. For a while both pools hold it: the old one until the
// queries that started on it have returned.

// Upstream returns upstream i, to hand on to a later pool (NewPoolFrom).
func (p *Pool) Upstream(i int) *Upstream { return p.upstreams[i] }

// NewPoolFrom is NewPool, except that specs[i] is served by kept[i] when
// that is non-nil: a running upstream of an earlier pool, whose Name,
// Address and slots must be specs[i]'s (specs[i].Transport is then not
// used: the upstream keeps its own). Only the upstreams not kept get an
// actor of their own. Kept upstreams follow p.Health from now on, in the
// earlier pool too.
//
// The pools share the kept upstreams: close the earlier one with
// CloseExcept(the new one), and a new one given up on before it served
// with CloseExcept(the earlier one).
func NewPoolFrom(p Policy, specs []Spec, kept []*Upstream, obs Observer) (*Pool, error) {
	if len(kept) != len(specs) {
		return nil, fmt.Errorf("pool: %d kept upstreams for %d specs", len(kept), len(specs))
	}
	if err := checkPool(p, specs, kept); err != nil {
		return nil, err
	}
	pool := &Pool{policy: p, observer: obs, shares: newShares()}
	var fresh []*Upstream
	for i, s := range specs {
		u := kept[i]
		if u == nil {
			u = newUpstream(s.Name, s.Address, s.Slots, s.Transport, p.Health)
			fresh = append(fresh, u)
		} else {
			u.setPolicy(p.Health)
			// A reload re-checks a looping upstream at once: the
			// operator may have fixed the loop.
			u.record(message{recheck: recheckLooping})
		}
		pool.upstreams = append(pool.upstreams, u)
	}
	pool.bind() // kept upstreams weigh their new peers for the all-down rule
	for _, u := range fresh {
		u.start()
	}
	return pool, nil
}

// checkPool is NewPool's validation, with a kept upstream standing in for
// its spec's transport.
func checkPool(p Policy, specs []Spec, kept []*Upstream) error {
	switch {
	case len(specs) == 0:
		return errors.New("pool: no upstreams")
	case len(specs) > MaxUpstreams:
		return fmt.Errorf("pool: %d upstreams, at most %d", len(specs), MaxUpstreams)
	case p.AttemptTimeout <= 0 || p.TotalTimeout < p.AttemptTimeout:
		return fmt.Errorf("pool: timeouts attempt=%v total=%v", p.AttemptTimeout, p.TotalTimeout)
	case p.Health.FailureThreshold < 1 || p.Health.Backoff <= 0 || p.Health.BackoffMax < p.Health.Backoff || p.Health.ProbeTimeout < 0:
		return fmt.Errorf("pool: health policy %+v", p.Health)
	}
	for i, s := range specs {
		if u := kept[i]; u != nil {
			if u.Name != s.Name || u.Address != s.Address || cap(u.slots) != s.Slots {
				return fmt.Errorf("pool: upstream %d (%s): kept upstream %s (%s, %d slots) is another", i, s.Name, u.Name, u.Address, cap(u.slots))
			}
			continue
		}
		if s.Slots < 1 || s.Transport == nil {
			return fmt.Errorf("pool: upstream %d (%s): slots=%d transport=%v", i, s.Name, s.Slots, s.Transport)
		}
	}
	return nil
}

// CloseExcept is Close, except that the upstreams next holds go on
// running: it stops the actors of p's other upstreams. Queries must have
// returned from p's Exchange before it is called. A later Close or
// CloseExcept of p does nothing.
func (p *Pool) CloseExcept(next *Pool) {
	p.closeOnce.Do(func() {
		p.shares.close()
		held := make(map[*Upstream]bool, len(next.upstreams))
		for _, u := range next.upstreams {
			held[u] = true
		}
		for _, u := range p.upstreams {
			if !held[u] {
				u.stop()
			}
		}
	})
}

// Holds reports whether u is one of p's upstreams.
func (p *Pool) Holds(u *Upstream) bool {
	for _, v := range p.upstreams {
		if v == u {
			return true
		}
	}
	return false
}

// setPolicy changes the health policy the actor applies to the outcomes
// it has not applied yet. The actor reads the policy under u.mu.
func (u *Upstream) setPolicy(h HealthPolicy) {
	u.mu.Lock()
	u.policy = h
	u.mu.Unlock()
}

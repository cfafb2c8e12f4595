package actors

import "time"

// The network's own state (spec section 8: the network is down). A local
// error (no route, network unreachable: Classify's GroupLocalResource)
// records nothing against an upstream, so with the WAN gone every
// upstream stays healthy while nothing resolves. Each actor therefore
// remembers its last local error and when it last had a recorded outcome
// (an answer, or a failure that the upstream's own path returned or let
// expire), and the pool reads the two together: when every upstream in
// service has had a local error more recently than anything else, and
// recently enough, the host has no way out.
//
// Local errors reach the actor from its probes and, since the dispatch
// records nothing for them, from Pool.LocalError. While an upstream's
// last word is a local error its actor probes it every backoff_ms, in
// backoff or not (prober.schedule), so the verdict is renewed while the
// network stays down and cleared by the first probe answered once it is
// back, without waiting for a client.

// Network is what the pool's recent outcomes say about this host's own
// way to its upstreams.
type Network struct {
	// Down: within the window, every upstream in service (not looping)
	// had a local error after its last recorded outcome, and so none
	// answered.
	Down bool

	// LastError is the most recent local error of any upstream's
	// attempts or probes, nil before one; LastErrorAt is when it was
	// seen and Upstream whose it was.
	LastError   error
	LastErrorAt time.Time
	Upstream    string
}

// NetworkOf reads the network's state at now from the upstreams' st. A
// local error counts while it is younger than window: the probes renew
// it every backoff_ms while it lasts, so an old one says nothing about
// now. With no upstream in service the network is not said to be down
// (the upstreams are: the health report says so).
func NetworkOf(st []Status, now time.Time, window time.Duration) Network {
	var n Network
	inService, cut := 0, 0
	for _, s := range st {
		if s.LastLocalError != nil && s.LastLocalErrorAt.After(n.LastErrorAt) {
			n.LastError, n.LastErrorAt, n.Upstream = s.LastLocalError, s.LastLocalErrorAt, s.Name
		}
		if s.Loop {
			continue // out of service by configuration: its checks say nothing of the network
		}
		inService++
		if s.cutOff(now, window) {
			cut++
		}
	}
	n.Down = inService > 0 && cut == inService
	return n
}

// cutOff reports whether s's last word, at now, is a local error younger
// than window.
func (s Status) cutOff(now time.Time, window time.Duration) bool {
	return s.LastLocalError != nil && s.LastLocalErrorAt.After(s.LastRecordedAt) && now.Sub(s.LastLocalErrorAt) < window
}

// NetworkWindow is how long a local error speaks for the network: two
// probe intervals (backoff_ms) and a probe's own timeout, so that the
// probes of an upstream cut off renew it before it lapses.
func (p *Pool) NetworkWindow() time.Duration {
	h := p.policy.Health
	return 2*h.Backoff + h.ProbeTimeout
}

// Network returns the network's state at now (NetworkOf over Status).
func (p *Pool) Network(now time.Time) Network {
	return NetworkOf(p.Status(), now, p.NetworkWindow())
}

// LocalError tells the actor of the upstream named upstream that one of
// its attempts ended at at with the local error err, which the dispatch
// records nowhere: health is untouched, but the network's state hears of
// it and the actor starts probing the upstream every backoff_ms until a
// probe finds the way out again. It never blocks: with the actor's inbox
// full the report is dropped (the next one will do). An unknown name is
// ignored (the upstream was removed by a reload).
func (p *Pool) LocalError(upstream string, at time.Time, err error) {
	for _, u := range p.upstreams {
		if u.Name == upstream {
			select {
			case u.inbox <- message{outcome: OutcomeLocalError, at: at, err: err}:
			default:
			}
			return
		}
	}
}

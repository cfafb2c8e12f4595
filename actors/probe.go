package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Health probes (spec section 4, "Health"). An upstream's actor probes it
// itself: once at start-up, whenever a backoff ends, and every backoff_ms
// while its last word is a local error (a link probe, network.go). A probe is one
// query for ". NS" over the upstream's own transport (its UDP socket, its
// TLS connections, its HTTP/2 client), bounded by HealthPolicy.ProbeTimeout
// and classified like an attempt. No client query is ever the trial.
//
// With HealthPolicy.Loops, a loop check (loop.go) goes in front of every
// probe, and the probe is sent only when the check did not come back:
// a probe of a looping upstream would itself go round the loop.
//
// A probe is the pool's own query, not a client's: it takes none of the
// upstream's slots. Taking one could make a client wait behind it (a
// probe of a saturated upstream at start-up), or keep the probe waiting
// for a slot and so say nothing about the upstream; there is at most one
// probe per upstream at a time, so an upstream sees at most slots + 1
// exchanges from us. (Over tcp:// a probe may still wait for one of the
// transport's connections, within its own probe_timeout.)

// errProbePanic: the transport panicked during a probe. It is our bug,
// not the upstream's, and counts as a local error.
var errProbePanic = errors.New("probe: transport panicked")

// probeKind is why a probe runs.
type probeKind uint8

const (
	probeStartup probeKind = iota // the start-up probe of an upstream thought healthy
	probeBackoff                  // the probe at the end of a backoff (or of a loop's wait)
	probeLoop                     // a loop check alone, of a healthy upstream (CheckLoops)
	probeLink                     // the probe of a healthy upstream whose last word was a local error (network.go)
)

// probeResult is how one probe ended.
type probeResult struct {
	check      checkResult // the loop check in front; check.seq 0 when none was sent
	probed     bool        // the probe itself ran: not behind a check that came back, nor for a check alone
	outcome    Outcome
	start, end time.Time
	err        error
}

// prober is an actor's probe machinery: the timer for the end of the
// backoff and the one probe in flight. It is owned by the actor's
// goroutine; only the probe goroutine it starts touches results and
// (through ctx) its cancellation.
type prober struct {
	timer *time.Timer      // or nil before the first backoff
	c     <-chan time.Time // timer.C while armed, else nil: a receive that never proceeds
	armed time.Time        // when it fires; zero when not armed

	// link is when a healthy upstream cut off (its last word a local
	// error) is probed next: backoff_ms after the local error that cut
	// it off, or after its last probe's. Zero when none is due.
	link time.Time

	running bool      // a probe is in flight: at most one
	kind    probeKind // the running probe's
	results chan probeResult

	// pending is a loop check asked for while a probe ran: done after
	// it, unless the probe's check went out after the request (pendSeq
	// is the upstream's checkSeq when pending was first asked for).
	pending recheck
	pendSeq uint32

	ctx    context.Context // cancelled by close: a probe in flight ends at once
	cancel context.CancelFunc
	wg     sync.WaitGroup // the probe goroutine
}

func newProber() *prober {
	ctx, cancel := context.WithCancel(context.Background())
	// results has room for the one probe in flight, so that the probe
	// goroutine never waits for the actor, even when the actor is gone.
	return &prober{results: make(chan probeResult, 1), ctx: ctx, cancel: cancel}
}

// start runs one probe of u on a goroutine of the prober's.
func (pr *prober) start(u *Upstream, kind probeKind) {
	pr.running, pr.kind = true, kind
	timeout := u.policyNow().ProbeTimeout
	looping := u.health.Loop
	pr.wg.Go(func() { pr.results <- u.probe(pr.ctx, timeout, kind, looping) })
}

// recheck is a request for a loop check now. After a reload that kept u
// (recheckLooping), a looping u is probed at once, its check first. Once
// the listeners are bound (recheckAll), a healthy u gets a check alone; a
// looping one has been found already, since its check came back. One in
// an ordinary backoff is checked by its next probe. While a probe runs
// the request waits for it.
func (pr *prober) recheck(u *Upstream, k recheck) {
	if u.loops == nil || u.policyNow().ProbeTimeout <= 0 {
		return
	}
	if pr.running {
		if pr.pending == 0 {
			pr.pendSeq = u.checkSeq.Load()
		}
		pr.pending |= k
		return
	}
	switch h := u.health; {
	case h.Loop && k&recheckLooping != 0:
		pr.disarm()
		pr.start(u, probeBackoff)
	case !h.InBackoff && k&recheckAll != 0:
		pr.start(u, probeLoop)
	}
}

// pendingRecheck runs a recheck that waited for the probe just ended,
// unless that probe sent its check after the request came: that check
// was the one asked for.
func (pr *prober) pendingRecheck(u *Upstream) {
	if k := pr.pending; k != 0 && !pr.running {
		pr.pending = 0
		if u.checkSeq.Load() == pr.pendSeq {
			pr.recheck(u, k)
		}
	}
}

// schedule arms the timer for the end of u's backoff, or, when u is
// healthy but cut off (its last word a local error: the network may be
// down), for its next link probe, backoff_ms after the local error; it
// disarms it when u is healthy and not cut off. While a probe runs
// nothing is armed: its outcome decides.
//
// It runs after every outcome the actor applies, so the common case, a
// healthy upstream with nothing armed, takes no lock and touches no timer.
func (pr *prober) schedule(u *Upstream) {
	h := u.health // the actor's own: no lock needed to read it
	switch {
	case pr.running:
	case !h.InBackoff && !u.cutOff():
		pr.link = time.Time{}
		if pr.c != nil {
			pr.disarm()
		}
	case u.policyNow().ProbeTimeout <= 0:
		pr.link = time.Time{}
		pr.disarm()
	case h.InBackoff:
		pr.link = time.Time{}
		if !pr.armed.Equal(h.Until) {
			pr.arm(h.Until)
		}
	default:
		// Cut off: the first local error sets the time, and the ones
		// after it (every client query's, while the network is down)
		// leave it: the probe comes backoff_ms after the first.
		if pr.link.IsZero() {
			pr.link = u.lastLocalErrAt.Add(u.policyNow().Backoff)
		}
		if !pr.armed.Equal(pr.link) {
			pr.arm(pr.link)
		}
	}
}

// fired is the timer's end: the backoff is over, or a link probe is due,
// so u is probed.
func (pr *prober) fired(u *Upstream) {
	pr.c, pr.armed = nil, time.Time{}
	now := time.Now()
	switch h := u.health; {
	case pr.running:
	case h.InBackoff && !now.Before(h.Until):
		pr.start(u, probeBackoff)
		return
	case !h.InBackoff && !pr.link.IsZero() && !now.Before(pr.link):
		pr.link = time.Time{} // the probe's end sets the next one, if still cut off
		pr.start(u, probeLink)
		return
	}
	pr.schedule(u)
}

func (pr *prober) arm(t time.Time) {
	d := time.Until(t)
	if pr.timer == nil {
		pr.timer = time.NewTimer(d)
	} else {
		pr.timer.Reset(d) // since Go 1.23 no stale tick can follow a Reset
	}
	pr.c, pr.armed = pr.timer.C, t
}

func (pr *prober) disarm() {
	if pr.timer != nil {
		pr.timer.Stop()
	}
	pr.c, pr.armed = nil, time.Time{}
}

// close cancels the probe in flight, if any, and waits for its goroutine.
func (pr *prober) close() {
	pr.cancel()
	pr.wg.Wait()
	pr.disarm()
}

// probeQuestion is the probe: ". NS", recursion desired, with the EDNS
// size nxdnsd asks every upstream with, so that the answer (about 1 KB
// with the root servers' addresses) comes back whole over UDP.
func probeQuestion() *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(".", dns.TypeNS)
	m.SetEdns0(dnsmsg.EDNSSize, false)
	return m
}

// probe sends one probe over u's transport, bounded by timeout, and
// classifies how it ended like an attempt (spec section 4): an answer; an
// expiry of the whole interval and a peer fault are failures; a local
// error, a cancellation (the pool closing) and anything that says nothing
// about the upstream are not. A probe is never truncated: it has no
// client's deadline to share. With loop checks, a check goes first, in
// its own interval of timeout; a probeLoop is the check alone, and so is
// the probe of a looping upstream whose check no resolver answered: the
// probe would go round the loop.
func (u *Upstream) probe(ctx context.Context, timeout time.Duration, kind probeKind, looping bool) (r probeResult) {
	defer func() {
		if v := recover(); v != nil {
			r.probed, r.end, r.err, r.outcome = true, time.Now(), fmt.Errorf("%w: %v", errProbePanic, v), OutcomeLocalError
		}
	}()
	if u.loops != nil {
		r.check = u.check(ctx, timeout)
		if r.check.looped || kind == probeLoop || ctx.Err() != nil || looping && r.check.verdict != checkResolved {
			return r
		}
	}
	r.probed = true
	r.start = time.Now()
	expiry := r.start.Add(timeout)
	q, err := transport.NewQuery(probeQuestion())
	if err == nil {
		_, err = u.transport.Exchange(ctx, q, expiry)
	}
	r.end, r.err = time.Now(), err
	r.outcome = probeOutcome(ctx, err, r.end, expiry)
	return r
}

func probeOutcome(ctx context.Context, err error, end, expiry time.Time) Outcome {
	switch {
	case err == nil:
		return OutcomeAnswer
	case ctx.Err() != nil:
		return OutcomeCanceled
	case !end.Before(expiry):
		return OutcomeExpired
	}
	switch Classify(err) {
	case GroupPeerFault:
		return OutcomePeerFault
	case GroupLocalResource:
		return OutcomeLocalError
	case GroupCanceled:
		return OutcomeCanceled
	default:
		return OutcomeCensored // a transport's budget of its own: nothing said
	}
}

// applyProbe records how a probe of the given kind ended, its loop check
// first, and tells OnProbe when the probe itself ran. A probe cancelled
// because the pool is closing never gets here: the actor has returned by
// then.
func (u *Upstream) applyProbe(r probeResult, kind probeKind) {
	if r.check.seq != 0 {
		u.checked(r.check)
	}
	if !r.probed {
		return
	}
	allDown := u.allDown()
	u.mu.Lock()
	p := u.policy
	h := u.health
	u.probes[r.outcome]++
	u.lastProbeAt, u.lastProbeOutcome = r.end, r.outcome
	// A probe speaks for the state it was started in. If attempts opened
	// the breaker while the start-up probe ran, or a pass-two answer
	// closed it while a backoff probe ran, newer evidence has decided and
	// the probe is only counted (as a stale timeout is in Health.Failure).
	// So is a probe of an upstream found looping while it ran (its check
	// came back after the check's exchange had ended).
	// A link probe is a healthy upstream's, as a start-up probe is.
	stale := (kind == probeStartup || kind == probeLink) && h.InBackoff || kind == probeBackoff && !h.InBackoff || h.Loop
	switch r.outcome {
	case OutcomeAnswer:
		u.rtt = u.rtt.Sample(r.end.Sub(r.start))
		u.lastRecordedAt = r.end
		if !stale {
			h = h.ProbeSuccess()
		}
	case OutcomeExpired, OutcomePeerFault:
		u.lastErr, u.lastErrAt = r.err, r.end
		u.lastRecordedAt = r.end
		if !stale {
			h = h.ProbeFailure(r.end, allDown, p)
		}
	default:
		if r.outcome == OutcomeLocalError {
			u.lastLocalErr, u.lastLocalErrAt = r.err, r.end
		}
		if !stale {
			h = h.ProbeLost(r.end, p)
		}
	}
	old := u.health
	u.health = h
	u.mu.Unlock()
	u.publish(old, h)
	if p.OnProbe != nil {
		p.OnProbe(u.Name, r.outcome, u.status())
	}
}

// allDown reports whether every upstream of u's pool other than u is in
// backoff: the all-down rule, read from the flags the actors publish.
func (u *Upstream) allDown() bool {
	peers := u.peers.Load()
	if peers == nil {
		return false
	}
	for _, v := range *peers {
		if v != u && !v.outOfService() {
			return false
		}
	}
	return true
}

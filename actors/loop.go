package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire"
)

// Forwarding loops (docs/operations.md, "Forwarding loops"). An upstream
// that forwards back to nxdnsd (nxdnsd its own upstream, or a router that
// forwards to the nxdnsd that forwards to it) turns every query into an
// endless chain, each hop a fresh query with a fresh deadline. To find
// one, an upstream's actor sends a loop check in front of every probe: a
// query for a name that carries the process's secret and the upstream's
// identity,
//
//	<secret>.<upstream id>.<sequence>.loop-check.nxdnsd.invalid.
//
// If that name arrives back as a client query, the query path recognises
// its own secret (Loops.Seen, before the special-use names), answers it
// NXDOMAIN at once without forwarding it, and tells the upstream it was
// sent through: that upstream loops, and is taken out of service in both
// passes of the dispatch (Health.LoopFound) until a later check no longer
// comes back. Names under invalid. are answered NXDOMAIN by any honest
// resolver and never leave a correct network; another nxdnsd forwards a
// check that is not its own, so that a loop through it is found by the
// nxdnsd that sent the check.

// LoopCheckZone is the zone of every loop check's name.
const LoopCheckZone = "loop-check.nxdnsd.invalid."

// secretLen is the length of the secret label: 16 hex digits, 64 random
// bits, which nobody who has not seen a check can guess.
const secretLen = 16

// LoopCheckLen is the length of every loop check's name, every label
// being of fixed width: the query path compares one length before it
// looks any further, so the check costs other queries nothing.
const LoopCheckLen = secretLen + 1 + 8 + 1 + 8 + 1 + len(LoopCheckZone)

// ErrLoop is the last error of an upstream found looping: /api/health
// shows it.
var ErrLoop = errors.New("forwarding loop: nxdnsd's loop check sent through this upstream came back to nxdnsd")

// LoopCheck is what a name is to the query path.
type LoopCheck uint8

const (
	NotLoopCheck     LoopCheck = iota // any other name
	OwnLoopCheck                      // this process's check, come back: answer it at once, never forward it
	ForeignLoopCheck                  // another nxdnsd's check: forward it, so that its sender finds a loop through us
)

// Loops are one process's loop checks: its secret and the upstreams that
// send them, by identity. One Loops serves every pool the process builds,
// so that a check sent by an upstream a reload kept is still recognised.
// It is safe for concurrent use.
type Loops struct {
	secret string // secretLen lower-case hex digits
	nextID atomic.Uint32

	mu  sync.Mutex // guards following; taken when a check comes back and when an upstream starts or stops, never for other queries
	ups map[uint32]*Upstream
}

// NewLoops returns the loop checks of a process, with a fresh secret.
func NewLoops() *Loops {
	var b [secretLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return &Loops{secret: hex.EncodeToString(b[:]), ups: make(map[uint32]*Upstream)}
}

// register gives u its identity in the checks' names.
func (l *Loops) register(u *Upstream) uint32 {
	id := l.nextID.Add(1)
	l.mu.Lock()
	l.ups[id] = u
	l.mu.Unlock()
	return id
}

func (l *Loops) unregister(id uint32) {
	l.mu.Lock()
	delete(l.ups, id)
	l.mu.Unlock()
}

// name is the name of upstream id's check number seq.
func (l *Loops) name(id, seq uint32) string {
	return fmt.Sprintf("%s.%08x.%08x.%s", l.secret, id, seq, LoopCheckZone)
}

// Seen tells what name, a client query's name in lower case and fully
// qualified, is to the query path. A check of this process's, come back,
// is reported to the upstream it was sent through before Seen returns, so
// before the query path answers it: that answer is what ends the check's
// own exchange. Callers may skip the call for a name whose length is not
// LoopCheckLen.
func (l *Loops) Seen(name string) LoopCheck {
	const id, seq, zone = secretLen + 1, secretLen + 1 + 9, secretLen + 1 + 18
	if len(name) != LoopCheckLen || name[zone-1:] != "."+LoopCheckZone {
		return NotLoopCheck
	}
	if name[:secretLen] != l.secret {
		return ForeignLoopCheck
	}
	i, err1 := strconv.ParseUint(name[id:id+8], 16, 32)
	s, err2 := strconv.ParseUint(name[seq:seq+8], 16, 32)
	if err1 != nil || err2 != nil || name[seq-1] != '.' || name[id-1] != '.' {
		return OwnLoopCheck // our secret in a name we never made: answered, never forwarded
	}
	l.mu.Lock()
	u := l.ups[uint32(i)]
	l.mu.Unlock()
	if u != nil {
		u.cameBack(uint32(s))
	}
	return OwnLoopCheck
}

// checkQuestion is a loop check: name as TXT, recursion desired, with
// nxdnsd's EDNS size, like a client's query that any forwarder passes on.
func checkQuestion(name string) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeTXT)
	m.SetEdns0(wire.EDNSSize, false)
	return m
}

// checkResult is how one loop check ended.
type checkResult struct {
	seq     uint32 // its sequence number; 0: none was sent
	looped  bool   // it came back to nxdnsd before its exchange ended
	verdict checkVerdict
	end     time.Time
}

// checkVerdict is what a check that did not come back says of the path.
type checkVerdict uint8

const (
	// checkLost: a local error or a cancellation; nothing was learnt.
	checkLost checkVerdict = iota
	// checkFailed: something on the path failed it: SERVFAIL, an expiry,
	// a peer fault. That is what a loop broken at another nxdnsd answers
	// (its own upstream out of service), so it does not end a loop.
	checkFailed
	// checkResolved: a resolver answered it (NXDOMAIN, as any name under
	// invalid.) without its coming back: the path does not loop.
	checkResolved
)

// check sends one loop check through u, bounded by timeout, on the probe
// goroutine (at most one per upstream at a time, so the only writer of
// checkSeq).
func (u *Upstream) check(ctx context.Context, timeout time.Duration) (c checkResult) {
	c.seq = u.checkSeq.Add(1)
	if c.seq == 0 { // wrapped: 0 means none
		c.seq = u.checkSeq.Add(1)
	}
	start := time.Now()
	expiry := start.Add(timeout)
	q, err := wire.NewQuery(checkQuestion(u.loops.name(u.loopID, c.seq)))
	var a wire.Answer
	if err == nil {
		a, err = u.transport.Exchange(ctx, q, expiry)
	}
	c.end = time.Now()
	c.looped = u.checkBack.Load() == c.seq
	switch o := probeOutcome(ctx, err, c.end, expiry); {
	case o == OutcomeAnswer && rcode(a) != dns.RcodeServerFailure:
		c.verdict = checkResolved
	case o.Recorded():
		c.verdict = checkFailed
	}
	return c
}

// rcode is an answer's rcode (its header's four bits when it is bytes).
func rcode(a wire.Answer) int {
	switch {
	case a.Msg != nil:
		return a.Msg.Rcode
	case len(a.Raw) >= 4:
		return int(a.Raw[3] & 0xF)
	}
	return dns.RcodeServerFailure
}

// cameBack is the query path's report that u's check number seq arrived
// as a client query. Only the latest check counts, once; the actor hears
// of it in case the check's exchange has ended already (an intermediate
// forwarder gave up on it before it came round).
func (u *Upstream) cameBack(seq uint32) {
	if seq != u.checkSeq.Load() || u.checkBack.Swap(seq) == seq {
		return
	}
	select {
	case u.inbox <- message{loop: seq}:
	case <-u.quit:
	}
}

// loopReported is the actor's side of cameBack.
func (u *Upstream) loopReported(seq uint32, now time.Time) {
	if seq == u.checkSeq.Load() {
		u.loopFound(seq, now)
	}
}

// checked applies how a loop check ended. Only a looping u has anything
// to learn from a check that did not come back.
func (u *Upstream) checked(c checkResult) {
	switch {
	case c.looped:
		u.loopFound(c.seq, c.end)
	case c.seq == u.loopSeq || !u.health.Loop:
		// It came back after its exchange ended and the actor heard of
		// it already: the loop stands. Or there is no loop to end.
	case c.verdict == checkResolved:
		u.loopGone(c.end)
	case c.verdict == checkFailed:
		u.loopStands(c.end)
	default:
		u.loopUnknown(c.end)
	}
}

// loopFound takes u out of service: check seq came back at now. OnLoop
// hears of it when u was not looping already.
func (u *Upstream) loopFound(seq uint32, now time.Time) {
	if u.loopSeq == seq {
		return
	}
	u.loopSeq = seq
	u.mu.Lock()
	p := u.policy
	old := u.health
	h := old.LoopFound(now, p)
	u.health = h
	u.lastErr, u.lastErrAt = ErrLoop, now
	u.mu.Unlock()
	u.publish(old, h)
	if !old.Loop && p.OnLoop != nil {
		p.OnLoop(u.Name, true, u.status())
	}
}

// loopGone records a check that did not come back at now: a looping u is
// an ordinary upstream in backoff again, probed at once.
func (u *Upstream) loopGone(now time.Time) {
	old := u.health // the actor's own
	if !old.Loop {
		return
	}
	u.mu.Lock()
	p := u.policy
	h := old.LoopGone(now, p)
	u.health = h
	u.mu.Unlock()
	u.publish(old, h)
	if p.OnLoop != nil {
		p.OnLoop(u.Name, false, u.status())
	}
}

// loopStands records a check of a looping u that something on the path
// failed at now: the loop stands, checked again after BackoffMax. Two
// nxdnsd that forward to each other and have both found the loop answer
// each other's checks SERVFAIL; taking that for the loop's end would put
// both back into service, and into the loop, at once.
func (u *Upstream) loopStands(now time.Time) {
	u.setHealth(u.health.LoopFound(now, u.policyNow()))
}

// loopUnknown records a check of a looping u that said nothing (a local
// error) at now: it is checked again after Backoff, as after a probe that
// says nothing (Health.ProbeLost).
func (u *Upstream) loopUnknown(now time.Time) {
	u.setHealth(u.health.ProbeLost(now, u.policyNow()))
}

// setHealth makes h the health of u, on its actor, and publishes it.
func (u *Upstream) setHealth(h Health) {
	u.mu.Lock()
	old := u.health
	u.health = h
	u.mu.Unlock()
	u.publish(old, h)
}

// recheck asks an actor for a loop check now: a set of these bits.
type recheck uint8

const (
	recheckLooping recheck = 1 << iota // if the upstream loops (a reload kept it: the loop may be fixed)
	recheckAll                         // if it is healthy (the listeners are bound now)
)

// CheckLoops has every healthy upstream's actor check for a loop now, with
// a check alone (one in backoff is checked by its next probe, a looping
// one has been found already).
// The daemon calls it once its listeners are bound, since the checks of
// the start-up probes may have gone out before anything listened. It
// does nothing without HealthPolicy.Loops.
func (p *Pool) CheckLoops() {
	for _, u := range p.upstreams {
		u.record(message{recheck: recheckAll})
	}
}

package actors

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Forwarding loops (docs/operations.md, "Forwarding loops"). An upstream
// that forwards back to nxdnsd (nxdnsd its own upstream, or a router that
// forwards to the nxdnsd that forwards to it) turns every query into an
// endless chain, each hop a fresh query with a fresh deadline. To find
// one, an upstream's actor sends a loop check in front of every probe: a
// query for a name that only this process can write, for this upstream
// and this check alone,
//
//	<tag>.<upstream id>.<sequence>.<instance>.loop-check.nxdnsd.invalid.
//
// The tag is an HMAC of the upstream's id, the check's sequence number and
// the instant it was sent, under a key drawn at start-up that never leaves
// the process; the instance is a random label that tells this process's
// checks from another nxdnsd's, and is no secret. If a check arrives back
// as a client query, the query path sees its instance (Loops.Seen, before
// the special-use names) and answers it NXDOMAIN at once without
// forwarding it; when it is the latest check sent through the upstream its
// id names, with that check's tag, within its window (CheckWindow) and for
// the first time, that upstream loops, and is taken out of service in both
// passes of the dispatch (Health.LoopFound) until a later check no longer
// comes back. Names under invalid. are answered NXDOMAIN by any honest
// resolver and never leave a correct network; another nxdnsd forwards a
// check that is not its own, so that a loop through it is found by the
// nxdnsd that sent the check.
//
// A check is sent in clear to its upstream: its operator, or anyone who
// sees a udp:// upstream's traffic, reads its name. What that name proves
// is only what it can: that check, back once within its window, through
// that upstream. A forged name (any tag, id or sequence), a check replayed
// after its window or a second time, or one sent through another upstream
// marks nothing. Someone who sees a check and sends it back within its
// window plays a loop through the upstream it was sent to, once; such a
// party can drop nxdnsd's queries to it anyway.

// LoopCheckZone is the zone of every loop check's name.
const LoopCheckZone = "loop-check.nxdnsd.invalid."

// tagBytes is how much of the HMAC a check's name carries: 80 bits, which
// a forger has to guess with one packet a guess, each tried against one
// upstream's latest check within its window.
const tagBytes = 10

// tagLen is the length of the tag label: tagBytes in lower-case base32,
// with no padding (80 bits are 16 digits of 5).
const tagLen = (tagBytes*8 + 4) / 5

// instanceLen is the length of the instance label: 16 hex digits, 64
// random bits, so that two nxdnsd never take each other's checks for their
// own.
const instanceLen = 16

// LoopCheckLen is the length of every loop check's name, every label
// being of fixed width: the query path compares one length before it
// looks any further, so the check costs other queries nothing.
const LoopCheckLen = tagLen + 1 + 8 + 1 + 8 + 1 + instanceLen + 1 + len(LoopCheckZone)

// CheckWindow is how long after it was sent a check that comes back is
// taken, or its probe_timeout_ms when that is longer (a check comes back
// during its own exchange, or a moment after, when a forwarder on the loop
// gave up on it before passing it on). A loop carries a check round in
// milliseconds; a copy sent back later proves nothing.
const CheckWindow = 5 * time.Second

// tagEncoding writes a tag as a DNS label: lower case, since the query
// path sees names in lower case, and without padding.
var tagEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ErrLoop is the last error of an upstream found looping: /api/health
// shows it.
var ErrLoop = errors.New("forwarding loop: nxdnsd's loop check sent through this upstream came back to nxdnsd")

// LoopCheck is what a name is to the query path.
type LoopCheck uint8

const (
	NotLoopCheck     LoopCheck = iota // any other name
	OwnLoopCheck                      // a name of this process's checks, taken or not: answer it at once, never forward it
	ForeignLoopCheck                  // another nxdnsd's check: forward it, so that its sender finds a loop through us
)

// Loops are one process's loop checks: its key, its instance and the
// upstreams that send them, by identity. One Loops serves every pool the
// process builds, so that a check sent by an upstream a reload kept is
// still recognised. It is safe for concurrent use.
type Loops struct {
	key      [32]byte // the HMAC key; never leaves the process
	instance string   // instanceLen lower-case hex digits; no secret
	suffix   string   // "." + instance + "." + LoopCheckZone: what ends every check of ours
	nextID   atomic.Uint32

	mu  sync.Mutex // guards following; taken when a check of ours comes back and when an upstream starts or stops, never for other queries
	ups map[uint32]*Upstream
}

// NewLoops returns the loop checks of a process, with a fresh key and
// instance.
func NewLoops() *Loops {
	l := &Loops{ups: make(map[uint32]*Upstream)}
	var inst [instanceLen / 2]byte
	_, _ = rand.Read(l.key[:]) // never fails (crypto/rand)
	_, _ = rand.Read(inst[:])
	l.instance = hex.EncodeToString(inst[:])
	l.suffix = "." + l.instance + "." + LoopCheckZone
	return l
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

// tag is the tag of upstream id's check number seq, sent at sent.
func (l *Loops) tag(id, seq uint32, sent time.Time) string {
	var msg [16]byte
	binary.BigEndian.PutUint32(msg[0:], id)
	binary.BigEndian.PutUint32(msg[4:], seq)
	binary.BigEndian.PutUint64(msg[8:], uint64(sent.UnixNano()))
	m := hmac.New(sha256.New, l.key[:])
	m.Write(msg[:])
	return tagEncoding.EncodeToString(m.Sum(nil)[:tagBytes])
}

// name is the name of upstream id's check number seq, with its tag.
func (l *Loops) name(id, seq uint32, tag string) string {
	return fmt.Sprintf("%s.%08x.%08x%s", tag, id, seq, l.suffix)
}

// sentCheck is an upstream's latest check, as a name that comes back is
// held to it. The probe goroutine makes a new one for every check; it is
// never changed.
type sentCheck struct {
	seq   uint32
	tag   string    // tagLen digits
	sent  time.Time // when it was sent, its monotonic reading included
	until time.Time // the end of its window
}

// accepts reports whether tag, come back now, is c's: c's tag, within c's
// window by the clock now. The tag is compared in constant time, and the
// clock is read only for c's tag: a forgery costs no clock reading.
func (c *sentCheck) accepts(tag string, now func() time.Time) bool {
	if subtle.ConstantTimeCompare([]byte(tag), []byte(c.tag)) != 1 {
		return false
	}
	t := now()
	return !t.Before(c.sent) && t.Before(c.until)
}

// Seen tells what name, a client query's name in lower case and fully
// qualified, is to the query path. A check of this process's that is the
// latest sent through the upstream its id names, with that check's tag,
// within its window, is reported to that upstream before Seen returns (so
// before the query path answers it: that answer is what ends the check's
// own exchange); the upstream takes it once. Any other name of this
// process's checks is reported nowhere. Callers may skip the call for a
// name whose length is not LoopCheckLen.
func (l *Loops) Seen(name string) LoopCheck {
	if len(name) != LoopCheckLen || name[len(name)-len(LoopCheckZone)-1:] != "."+LoopCheckZone {
		return NotLoopCheck
	}
	if name[len(name)-len(l.suffix):] != l.suffix {
		return ForeignLoopCheck
	}
	l.cameBack(name)
	return OwnLoopCheck
}

// cameBack reports name, a name of this process's checks come back, to
// the upstream whose latest check it is, if any.
func (l *Loops) cameBack(name string) {
	const id, seq = tagLen + 1, tagLen + 1 + 9
	if name[id-1] != '.' || name[seq-1] != '.' {
		return
	}
	i, err1 := strconv.ParseUint(name[id:id+8], 16, 32)
	s, err2 := strconv.ParseUint(name[seq:seq+8], 16, 32)
	if err1 != nil || err2 != nil {
		return
	}
	l.mu.Lock()
	u := l.ups[uint32(i)]
	l.mu.Unlock()
	if u == nil {
		return
	}
	if c := u.lastCheck.Load(); c != nil && c.seq == uint32(s) && c.accepts(name[:tagLen], time.Now) {
		u.cameBack(c.seq)
	}
}

// checkQuestion is a loop check: name as TXT, recursion desired, with
// nxdnsd's EDNS size, like a client's query that any forwarder passes on.
func checkQuestion(name string) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeTXT)
	m.SetEdns0(dnsmsg.EDNSSize, false)
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
	tag := u.loops.tag(u.loopID, c.seq, start)
	u.lastCheck.Store(&sentCheck{seq: c.seq, tag: tag, sent: start, until: start.Add(max(timeout, CheckWindow))})
	q, err := transport.NewQuery(checkQuestion(u.loops.name(u.loopID, c.seq, tag)))
	var a transport.Answer
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
func rcode(a transport.Answer) int {
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
// hears of it when u was not looping already, and OnLoopLeavesNone too
// when no upstream of u's pool is left in service.
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
	if old.Loop {
		return
	}
	if p.OnLoop != nil {
		p.OnLoop(u.Name, true, u.status())
	}
	if p.OnLoopLeavesNone != nil && u.allDown() {
		p.OnLoopLeavesNone(u.Name, u.poolStatus())
	}
}

// poolStatus is the status of every upstream of u's pool, in priority
// order.
func (u *Upstream) poolStatus() []Status {
	peers := u.peers.Load()
	if peers == nil {
		return []Status{u.status()}
	}
	out := make([]Status, len(*peers))
	for i, v := range *peers {
		out[i] = v.status()
	}
	return out
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

package auth

import (
	"net/netip"
	"sync"
	"time"
)

// Throttling of failed logins and bearer tokens (spec section 13): after
// MaxFailures failures from one client within ThrottleWindow, every login
// and token from it is answered 429 until the oldest of those failures is
// a window old. A client thus gets at most MaxFailures guesses a minute,
// each of them a bcrypt check.
const (
	MaxFailures    = 5
	ThrottleWindow = time.Minute
)

// maxThrottled bounds the clients whose failures are remembered: each is
// under 200 bytes, and a LAN has far fewer clients. When it is full, the
// clients with no failure left in the window are forgotten first.
const maxThrottled = 4096

// pendingRetry is the Retry-After of a client refused only because its
// attempts in progress would make up the rest of its allowance: one of
// them is decided within a bcrypt check's time.
const pendingRetry = time.Second

// throttle remembers each client's latest failures. A success does not
// clear them: a client holding one valid read token could otherwise
// reset its count between password guesses.
//
// An attempt that needs a bcrypt check is counted from its begin, before
// the check: a client sending 64 guesses at once gets MaxFailures of them
// checked, not 64 (each would pass a check of failures already recorded).
type throttle struct {
	mu      sync.Mutex // guards following
	clients map[netip.Prefix]*failures
}

// failures is one client's latest failures, a ring of MaxFailures times,
// and its attempts being checked.
type failures struct {
	at      [MaxFailures]time.Time
	next    int // where the next failure goes: the oldest once the ring is full
	pending int // attempts begun and not yet ended
}

func newThrottle() *throttle {
	return &throttle{clients: make(map[netip.Prefix]*failures)}
}

// clientKey is who a client is for throttling: its IPv4 address, or the
// /64 of its IPv6 address, since one IPv6 host picks new addresses from
// its /64 at will (privacy addresses) and would otherwise get a fresh
// count with each.
func clientKey(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.WithZone("").Prefix(64)
	return p
}

// blocked reports whether the client's attempts are refused at now, and
// until when.
func (t *throttle) blocked(c netip.Prefix, now time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.blockedLocked(t.clients[c], now)
}

func (t *throttle) blockedLocked(f *failures, now time.Time) (time.Time, bool) {
	if f == nil {
		return time.Time{}, false
	}
	n, oldest := f.inWindow(now)
	switch {
	case n >= MaxFailures:
		return oldest.Add(ThrottleWindow), true
	case n+f.pending >= MaxFailures:
		return now.Add(pendingRetry), true
	}
	return time.Time{}, false
}

// begin counts an attempt of the client at now that needs a check, or
// reports that it is refused and until when. Every begin that returns
// true is followed by one end.
func (t *throttle) begin(c netip.Prefix, now time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.clients[c]
	if until, refused := t.blockedLocked(f, now); refused {
		return until, false
	}
	if f == nil {
		if len(t.clients) >= maxThrottled {
			t.pruneLocked(now)
		}
		f = &failures{}
		t.clients[c] = f
	}
	f.pending++
	return time.Time{}, true
}

// end ends an attempt begun at the client, a failure at now unless ok.
func (t *throttle) end(c netip.Prefix, ok bool, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.clients[c]
	if f == nil { // pruned while being checked, when the table was full
		if ok {
			return
		}
		f = &failures{pending: 1}
		t.clients[c] = f
	}
	f.pending = max(f.pending-1, 0)
	if !ok {
		f.at[f.next] = now
		f.next = (f.next + 1) % MaxFailures
	}
}

// inWindow is how many of the failures are within the window before now,
// and the oldest of them.
func (f *failures) inWindow(now time.Time) (n int, oldest time.Time) {
	for i := range MaxFailures {
		at := f.at[(f.next+i)%MaxFailures] // oldest first
		if at.IsZero() || !now.Before(at.Add(ThrottleWindow)) {
			continue
		}
		if n == 0 {
			oldest = at
		}
		n++
	}
	return n, oldest
}

// pruneLocked forgets the clients with no failure in the window and no
// attempt being checked; if that frees nothing, one client at random, so
// that the table stays bounded whatever an attacker with many addresses
// does.
func (t *throttle) pruneLocked(now time.Time) {
	for c, f := range t.clients {
		if n, _ := f.inWindow(now); n == 0 && f.pending == 0 {
			delete(t.clients, c)
		}
	}
	for c := range t.clients {
		if len(t.clients) < maxThrottled {
			break
		}
		delete(t.clients, c)
	}
}

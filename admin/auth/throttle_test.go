package auth

import (
	"net/netip"
	"testing"
	"time"
)

func failN(tr *throttle, c netip.Prefix, n int, now time.Time) {
	for range n {
		if _, ok := tr.begin(c, now); ok {
			tr.end(c, false, now)
		}
	}
}

// Five failures within a minute refuse the client until the first of
// them is a minute old; other clients are not touched.
func TestThrottleFiveAMinute(t *testing.T) {
	t.Parallel()
	tr := newThrottle()
	c, other := clientKey(netip.MustParseAddr("192.0.2.7")), clientKey(netip.MustParseAddr("192.0.2.8"))
	t0 := newClock().Now()
	for i := range MaxFailures {
		if _, blocked := tr.blocked(c, t0); blocked {
			t.Fatalf("blocked after %d failures", i)
		}
		failN(tr, c, 1, t0.Add(time.Duration(i)*time.Second))
	}
	now := t0.Add(10 * time.Second)
	until, blocked := tr.blocked(c, now)
	if !blocked || !until.Equal(t0.Add(ThrottleWindow)) {
		t.Fatalf("after 5 failures: blocked %v until %v, want until %v", blocked, until, t0.Add(ThrottleWindow))
	}
	if _, ok := tr.begin(c, now); ok {
		t.Error("begin succeeded for a blocked client")
	}
	if _, blocked := tr.blocked(other, now); blocked {
		t.Error("another client is blocked")
	}
	if _, blocked := tr.blocked(c, t0.Add(ThrottleWindow-time.Nanosecond)); !blocked {
		t.Error("unblocked before the minute is over")
	}
	// At t0+60 s the first failure leaves the window: four remain, so
	// one more guess is allowed, and a failure blocks again until the
	// second one (t0+1 s) is a minute old.
	now = t0.Add(ThrottleWindow)
	if _, blocked := tr.blocked(c, now); blocked {
		t.Fatal("still blocked once the minute is over")
	}
	failN(tr, c, 1, now)
	if until, blocked := tr.blocked(c, now); !blocked || !until.Equal(t0.Add(ThrottleWindow+time.Second)) {
		t.Errorf("after a 6th failure: blocked %v until %v, want until t0+61s", blocked, until)
	}
	// A minute after the last failure, all is forgotten.
	if _, blocked := tr.blocked(c, now.Add(ThrottleWindow)); blocked {
		t.Error("blocked a minute after the last failure")
	}
}

// Attempts being checked count against the allowance: a client sending
// many at once gets MaxFailures of them checked. Mutation: begin counting
// only recorded failures lets all ten through.
func TestThrottleCountsAttemptsInProgress(t *testing.T) {
	t.Parallel()
	tr := newThrottle()
	c := clientKey(netip.MustParseAddr("192.0.2.7"))
	now := newClock().Now()
	begun := 0
	for range 10 {
		if until, ok := tr.begin(c, now); ok {
			begun++
		} else if !until.Equal(now.Add(pendingRetry)) {
			t.Errorf("refused until %v, want now+%v", until, pendingRetry)
		}
	}
	if begun != MaxFailures {
		t.Fatalf("%d attempts begun at once, want %d", begun, MaxFailures)
	}
	// Successes free their turns without counting as failures.
	for range begun {
		tr.end(c, true, now)
	}
	if _, blocked := tr.blocked(c, now); blocked {
		t.Error("blocked after successes alone")
	}
}

// An IPv6 client is counted by its /64: new privacy addresses do not buy
// new guesses.
func TestThrottleIPv6By64(t *testing.T) {
	t.Parallel()
	tr := newThrottle()
	now := newClock().Now()
	for i := range MaxFailures {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i + 1)})
		failN(tr, clientKey(a), 1, now)
	}
	if _, blocked := tr.blocked(clientKey(netip.MustParseAddr("2001:db8::ffff")), now); !blocked {
		t.Error("five failures from five addresses of one /64 did not block it")
	}
	if _, blocked := tr.blocked(clientKey(netip.MustParseAddr("2001:db8:0:1::1")), now); blocked {
		t.Error("the next /64 is blocked too")
	}
	if clientKey(netip.MustParseAddr("::ffff:192.0.2.7")) != clientKey(netip.MustParseAddr("192.0.2.7")) {
		t.Error("an IPv4-mapped client is not its IPv4 address")
	}
}

// The table of clients stays bounded; those with nothing in the window
// go first.
func TestThrottleBounded(t *testing.T) {
	t.Parallel()
	tr := newThrottle()
	now := newClock().Now()
	for i := range maxThrottled + 100 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		failN(tr, clientKey(a), 1, now)
		if i == 0 {
			now = now.Add(ThrottleWindow) // the first one's failure leaves the window
		}
	}
	if n := len(tr.clients); n > maxThrottled {
		t.Errorf("%d clients remembered, want at most %d", n, maxThrottled)
	}
	if tr.clients[clientKey(netip.AddrFrom4([4]byte{10, 0, 0, 0}))] != nil {
		t.Error("the client with no failure in the window was kept")
	}
}

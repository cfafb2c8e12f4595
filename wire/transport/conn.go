package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Buffer sizes. Receive buffers are pooled: a forwarder does the same small
// exchange thousands of times, and a fresh 4 KiB per query would be most of
// its garbage.
const (
	maxMsgLen = 65535 // the largest DNS message (two-byte TCP length)

	// smallBufLen holds any UDP answer to a query advertising up to 4096
	// bytes of EDNS payload, the common maximum (and 512-byte classic DNS).
	smallBufLen = 4096
	// largeBufLen holds a whole TCP frame: length prefix and message.
	largeBufLen = 2 + maxMsgLen
)

var (
	smallBufs = sync.Pool{New: func() any { return new([smallBufLen]byte) }}
	largeBufs = sync.Pool{New: func() any { return new([largeBufLen]byte) }}
)

// getBuf returns a pooled buffer of at least n bytes (n <= largeBufLen).
// Give it back with putBuf, unsliced.
func getBuf(n int) []byte {
	if n <= smallBufLen {
		return smallBufs.Get().(*[smallBufLen]byte)[:]
	}
	return largeBufs.Get().(*[largeBufLen]byte)[:]
}

// putBuf returns a buffer from getBuf to its pool.
func putBuf(b []byte) {
	switch cap(b) {
	case smallBufLen:
		smallBufs.Put((*[smallBufLen]byte)(b[:smallBufLen]))
	case largeBufLen:
		largeBufs.Put((*[largeBufLen]byte)(b[:largeBufLen]))
	}
}

// aLongTimeAgo is a deadline in the past: setting it makes blocked reads
// and writes on a socket return at once (the trick net/http uses).
var aLongTimeAgo = time.Unix(1, 0)

// watch binds c to one exchange: deadline (zero: none) becomes c's,
// clearing an old one, and a cancellation of ctx moves c's deadline into
// the past so a blocked read or write returns promptly.
//
// The returned stop must be called when the exchange ends. It reports
// whether the cancellation was kept away from c: false means c's deadline
// was, or may still be, moved by it, so c must be closed, never reused.
func watch(ctx context.Context, c net.Conn, deadline time.Time) (stop func() bool) {
	_ = c.SetDeadline(deadline) // fails only on a closed socket; the I/O reports it
	return context.AfterFunc(ctx, func() { _ = c.SetDeadline(aLongTimeAgo) })
}

// cancelPoll is how often the goroutine that waits for a transport's
// answers (udpPoller.expire, dotConn.expire) polls the contexts of the exchanges waiting
// on it for cancellation. Each exchange's deadline ends it exactly; a
// cancellation (a shutdown that ran out of time) only needs noticing soon,
// and polling spares every exchange a registration with its context,
// which all queries share.
const cancelPoll = 100 * time.Millisecond

// waitEnded reports why a wait with deadline d (zero: none) under ctx has
// ended at now, or nil while it goes on.
func waitEnded(ctx context.Context, d, now time.Time) error {
	if !d.IsZero() && !now.Before(d) {
		return context.DeadlineExceeded
	}
	return ctx.Err()
}

// foldWake folds a live wait whose deadline is d (zero: none) into next,
// the time the reader of its socket or connection is to wake (zero: not
// yet decided): the earliest deadline of its waits, or the next
// cancellation poll after now when that comes first.
func foldWake(next, now, d time.Time) time.Time {
	if next.IsZero() {
		next = now.Add(cancelPoll)
	}
	if !d.IsZero() && d.Before(next) {
		return d
	}
	return next
}

// wakeFor reports when a reader armed for armed (zero: sleeping without a
// deadline) must wake instead, now that a wait with deadline d has joined
// it, and whether that changes its alarm at all. It reads the clock only
// to wake a sleeping reader.
func wakeFor(armed, d time.Time) (time.Time, bool) {
	switch {
	case armed.IsZero():
		return foldWake(time.Time{}, time.Now(), d), true
	case !d.IsZero() && d.Before(armed):
		return d, true
	}
	return armed, false
}

// ioError wraps err from step ("reading from") on an upstream labelled
// label. When ctx is done and err is the deadline error that watch caused,
// ctx's own error replaces it, so a cancelled exchange reports
// context.Canceled rather than an i/o timeout we caused ourselves. Other
// errors (connection refused, reset) keep their chain for errors.Is.
func ioError(ctx context.Context, step, label string, err error) error {
	if cerr := ctx.Err(); cerr != nil && (IsTimeout(err) || errors.Is(err, cerr)) {
		err = cerr
	}
	return fmt.Errorf("%s %s: %w", step, label, err)
}

// IsTimeout reports whether err is an expiry: of a socket's deadline, of a
// context's (context.DeadlineExceeded is a net.Error too), or a
// forward-zone resolver's timeout (ErrResolverTimeout).
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, ErrResolverTimeout) || errors.As(err, &ne) && ne.Timeout()
}

// idleSweep schedules a transport's sweep of its idle connections (TCP's,
// DoT's): one timer, armed while an idle connection may expire. Its fields
// are guarded by the transport's mutex.
type idleSweep struct {
	timer *time.Timer // or nil before the first arm
	armed bool        // timer is scheduled
}

// armLocked schedules sweep(time.Now()) after d. sweep is the transport's
// expireIdle, which disarms the sweep first and arms it again for the
// next connection to expire.
func (s *idleSweep) armLocked(d time.Duration, sweep func(now time.Time)) {
	if s.timer == nil {
		s.timer = time.AfterFunc(d, func() { sweep(time.Now()) })
	} else {
		s.timer.Reset(d)
	}
	s.armed = true
}

// stopLocked stops the timer, when the transport closes.
func (s *idleSweep) stopLocked() {
	if s.timer != nil {
		s.timer.Stop()
		s.armed = false
	}
}

package transport

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The poller's goroutine, run, and how a wait ends: with its answer, an
// ICMP error that quotes its query, its deadline, its context's end, or
// the poller's close.

// arm has run wake at t (zero: never) to look at the waits. The caller
// holds p.mu.
func (p *udpPoller) arm(t time.Time) {
	p.armed = t
	_ = p.file.SetReadDeadline(t) // fails only on a closed file, when run is ending
}

// run is the poller's goroutine: it reads each exchange's socket when
// epoll says it is readable, and ends waits at their deadlines, until
// close.
func (p *udpPoller) run() {
	defer p.reader.Done()
	for {
		err := p.raw.Read(p.poll)
		switch {
		case err == nil && p.everr == nil:
			for _, ev := range p.events[:p.nev] {
				if s := p.claim(ev.Fd); s != nil {
					p.receive(s)
				}
			}
		case errors.Is(err, os.ErrDeadlineExceeded):
			if p.expire() {
				return
			}
		default:
			// The file was closed, which close does only once run has
			// ended, or the wait failed, which it cannot on a valid
			// instance: something closed or broke the instance under
			// the poller. The transport replaces it.
			if err == nil {
				err = p.everr
			}
			p.end(err)
			return
		}
	}
}

// claim returns the socket an event names, claimed for run to read, or
// nil when no exchange waits on it: the event came after its exchange's
// answer (a duplicate, a late or forged answer, which disconnect empties),
// or its socket has been closed and its index given to another since,
// which only costs a read.
func (p *udpPoller) claim(idx int32) *udpSock {
	p.mu.Lock()
	defer p.mu.Unlock()
	if idx < 0 || int(idx) >= len(p.socks) {
		return nil
	}
	s := p.socks[idx]
	if s == nil || !s.busy || s.done {
		return nil
	}
	s.claimed = true
	return s
}

// receive reads s's socket, claimed, until its answer comes or it has
// nothing more. A datagram without the exchange's ID is dropped; an ICMP
// error fails the exchange only when it quotes its query (see
// drainQuoted): another, which anyone who knows the port can forge, fails
// nothing.
func (p *udpPoller) receive(s *udpSock) {
	b := s.buf[:cap(s.buf)]
	var quoted [8]uint16
	for {
		n, err := recvTrunc(s.fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			p.unclaim(s)
			return
		case err != nil && isICMPError(err):
			if quotes(drainQuoted(s.fd, quoted[:0]), s.id) {
				p.deliver(s, 0, os.NewSyscallError("recvfrom", err))
				return
			}
			continue
		case err != nil:
			p.deliver(s, 0, os.NewSyscallError("recvfrom", err))
			return
		case n < 2 || binary.BigEndian.Uint16(b) != s.id:
			continue // not this query's: dropped
		}
		p.deliver(s, n, nil)
		return
	}
}

// recvTrunc reads a datagram from the socket fd into b, as much as fits,
// and returns its whole length (MSG_TRUNC), so that an answer too large
// for b is known to be. A bare system call: unix.Recvfrom allocates the
// sender's address.
func recvTrunc(fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), unix.MSG_TRUNC, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// deliver ends s's wait, claimed, with a datagram of n bytes or err.
func (p *udpPoller) deliver(s *udpSock, n int, err error) {
	p.mu.Lock()
	s.claimed = false
	p.deliverLocked(s, n, err)
	p.mu.Unlock()
}

// unclaim lets go of s, whose socket had nothing for it: its wait goes
// on, unless it failed or the poller closed while run was reading.
func (p *udpPoller) unclaim(s *udpSock) {
	p.mu.Lock()
	s.claimed = false
	switch {
	case s.abort != nil:
		p.deliverLocked(s, 0, s.abort)
	case p.closed:
		p.deliverLocked(s, 0, net.ErrClosed)
	}
	p.mu.Unlock()
}

// fail ends s's wait with its exchange's own failure (a write that
// failed), at once or, when run holds it claimed, when run lets go of it.
func (p *udpPoller) fail(s *udpSock, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.claimed {
		s.abort = err
		return
	}
	p.deliverLocked(s, 0, err)
}

// deliverLocked ends s's wait with n bytes or err, unless it has ended
// already. The caller holds p.mu and s is not claimed.
func (p *udpPoller) deliverLocked(s *udpSock, n int, err error) {
	if s.done {
		return
	}
	s.n, s.err, s.done = n, err, true
	s.ready <- struct{}{}
}

// expire is run waking at the time it was armed for: every wait whose
// deadline has passed gets context.DeadlineExceeded, every wait whose
// context has ended gets the context's error, and run is armed again for
// the earliest deadline of the others or the next cancellation poll,
// whichever is first. Waits end at their deadline, as a timer of their own
// would end them, and notice a cancellation within cancelPoll. It reports
// whether the poller is closed, which ends run.
func (p *udpPoller) expire() bool {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return true
	}
	var next time.Time
	for _, s := range p.socks {
		if s == nil || !s.busy || s.done {
			continue
		}
		if err := waitEnded(s.ctx, s.deadline, now); err != nil {
			p.deliverLocked(s, 0, err)
			continue
		}
		next = foldWake(next, now, s.deadline)
	}
	p.arm(next)
	return false
}

// end fails every wait with err: run is ending, and no claim is held. The
// transport's next exchange replaces the poller (see UDP.sockets).
func (p *udpPoller) end(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended.Store(true)
	p.closed = true
	for _, s := range p.socks {
		if s != nil && s.busy {
			p.deliverLocked(s, 0, err)
		}
	}
}

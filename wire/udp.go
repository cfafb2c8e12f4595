package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// UDP exchanges queries with one upstream over UDP, the "udp://IP:PORT"
// address form. A truncated answer is retried over TCP to the same address
// within the same context: it is one attempt, whatever it takes.
//
// Each exchange uses a connected socket of its own, taken from a small free
// list. A socket goes back on the list only after a clean exchange (the
// answer to its query was read); one that timed out, was cancelled or read
// garbage is closed, so a late answer to an old query can never be mistaken
// for the answer to a new one.
//
// A UDP is safe for concurrent use.
type UDP struct {
	addr    string // IP:PORT
	label   string // "udp://IP:PORT", naming the upstream in errors
	tcp     *TCP   // the truncation fallback to the same address; always non-nil
	maxIdle int
	dialer  net.Dialer

	dials atomic.Uint64 // sockets opened, so tests can prove reuse

	mu     sync.Mutex // guards following
	idle   []*udpConn // clean sockets, the most recently used last
	closed bool       // Close was called: sockets are closed on return
}

var (
	_ Transport    = (*UDP)(nil)
	_ RawExchanger = (*UDP)(nil)
)

// udpConn is a connected UDP socket. Only the exchange that took it from
// the free list touches it.
type udpConn struct {
	net.Conn
	lastID   uint16    // wire ID of the last exchange completed on it
	used     bool      // lastID is meaningful
	deadline time.Time // the socket's deadline as last set
}

// arm sets c's deadline for an exchange under a LazyContext: the context's
// deadline or the next cancellation poll, whichever comes first. A deadline
// already set that still lies ahead, and not past the context's, is kept:
// setting one takes the runtime's timer lock, and a poll that comes early
// costs one more loop, not correctness.
func (c *udpConn) arm(ctx context.Context, now time.Time) {
	if d, ok := ctx.Deadline(); c.deadline.After(now) && ok && !c.deadline.After(d) {
		return
	}
	c.deadline = nextPoll(ctx, now)
	_ = c.SetDeadline(c.deadline)
}

// polled reports whether err, from I/O on c under a LazyContext, is one of
// arm's polls rather than the end of the exchange: a socket timeout while
// ctx is neither cancelled nor past its deadline. It re-arms c, so the
// caller retries the I/O.
func (c *udpConn) polled(ctx context.Context, err error) bool {
	if !isTimeout(err) || ctx.Err() != nil {
		return false
	}
	c.deadline = nextPoll(ctx, time.Now())
	_ = c.SetDeadline(c.deadline)
	return true
}

// NewUDP returns a transport to the upstream at addr (IP:PORT). It opens no
// socket until the first exchange. WithMaxIdle bounds the free list; the
// other options tune the TCP fallback.
func NewUDP(addr string, opts ...Option) *UDP {
	o := buildOptions(opts)
	return &UDP{
		addr:    addr,
		label:   "udp://" + addr,
		tcp:     NewTCP(addr, opts...),
		maxIdle: o.maxIdle,
	}
}

// Exchange sends m and returns its answer with m's ID, retrying over TCP
// when the answer is truncated, as the Exchanger contract says. Errors name
// the upstream and keep their chain: the sentinels of this package, context
// errors, net timeouts and syscall errors (a closed port reports
// syscall.ECONNREFUSED) all match with errors.Is.
func (u *UDP) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	r, err := u.exchangeDatagram(ctx, m)
	if err != nil || !r.Truncated {
		return r, err
	}
	return u.tcp.Exchange(ctx, m)
}

// exchangeDatagram is Exchange without the TCP fallback: a truncated answer
// is returned as it came, or as a bare truncated header when it did not
// even parse (some servers cut records in half). The forward-zone client
// drives the fallback itself.
func (u *UDP) exchangeDatagram(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("exchanging with %s: %w", u.label, err)
	}
	c, err := u.conn(ctx)
	if err != nil {
		return nil, err
	}
	return u.roundTrip(ctx, c, m)
}

// roundTrip packs m and exchanges it on c, whose ownership it takes.
func (u *UDP) roundTrip(ctx context.Context, c *udpConn, m *dns.Msg) (*dns.Msg, error) {
	buf := getBuf(ClientUDPSize(m))
	defer putBuf(buf)

	id := newWireID(c.lastID)
	query, err := packQuery(m, id, buf)
	if err != nil {
		u.put(c) // nothing was sent: c is as clean as it was
		return nil, err
	}
	a, err := u.send(ctx, c, m, query, id, buf, false)
	return a.Msg, err
}

// ExchangeRaw is Exchange on the byte path: q.Packed goes out with a wire
// ID of the socket's, and an answer whose bytes LayoutAnswer vouches for
// comes back in q.Buf as it was read. Any other answer is parsed as
// Exchange parses it (a truncated one retried over TCP) and returned as
// Msg.
func (u *UDP) ExchangeRaw(ctx context.Context, q *WireQuery) (Answer, error) {
	size := ClientUDPSize(q.Msg)
	if cap(q.Buf) < size || len(q.Packed) < headerLen {
		r, err := u.Exchange(ctx, q.Msg)
		return Answer{Msg: r}, err
	}
	if err := ctx.Err(); err != nil {
		return Answer{}, fmt.Errorf("exchanging with %s: %w", u.label, err)
	}
	c, err := u.conn(ctx)
	if err != nil {
		return Answer{}, err
	}
	id := newWireID(c.lastID)
	binary.BigEndian.PutUint16(q.Packed, id)
	// The whole buffer: some servers send more than the query's EDNS
	// size allows, and an answer cut short by the read would be lost.
	a, err := u.send(ctx, c, q.Msg, q.Packed, id, q.Buf[:cap(q.Buf)], true)
	if err != nil || a.Msg == nil || !a.Msg.Truncated {
		return a, err
	}
	r, err := u.tcp.Exchange(ctx, q.Msg)
	return Answer{Msg: r}, err
}

// send writes query, m packed with wire ID id, on c and reads its answer
// into buf. It owns c from then on: c returns to the free list after a
// clean exchange and is closed otherwise. With raw, an answer that
// LayoutAnswer vouches for is returned as bytes; every other answer is
// parsed. A truncated answer is returned as it came, or as a bare truncated
// header when it did not even parse (some servers cut records in half).
func (u *UDP) send(ctx context.Context, c *udpConn, m *dns.Msg, query []byte, id uint16, buf []byte, raw bool) (Answer, error) {
	clean := false
	_, lazy := ctx.(LazyContext)
	stop := stopNothing
	if lazy {
		c.arm(ctx, time.Now())
	} else {
		stop = watch(ctx, c)
		c.deadline, _ = ctx.Deadline()
	}
	defer func() {
		if stop() && clean {
			c.lastID, c.used = id, true
			u.put(c)
		} else {
			_ = c.Close()
		}
	}()

	for {
		_, err := c.Write(query)
		if err == nil {
			break
		}
		if !lazy || !c.polled(ctx, err) {
			return Answer{}, ioError(ctx, "writing to", u.label, err)
		}
	}
	for {
		n, err := c.Read(buf)
		if err != nil && lazy && c.polled(ctx, err) {
			continue
		}
		if err != nil {
			return Answer{}, ioError(ctx, "reading from", u.label, err)
		}
		b := buf[:n]
		if c.used && n >= 2 && binary.BigEndian.Uint16(b) == c.lastID {
			// A duplicate of the previous exchange's answer, sent twice
			// by the upstream or the network: not evidence, not ours.
			continue
		}
		if raw && !truncatedHeader(b) {
			if l, ok := LayoutAnswer(query, b, id); ok {
				clean = true
				return Answer{Raw: b, Layout: l}, nil
			}
		}
		r, err := decodeReply(m, id, b)
		if errors.Is(err, ErrMalformed) && truncatedHeader(b) {
			// Our ID (decodeReply checked it), cut short: TCP will
			// carry the whole answer.
			clean = true
			return Answer{Msg: &dns.Msg{MsgHdr: dns.MsgHdr{Id: m.Id, Response: true, Truncated: true}}}, nil
		}
		if err != nil {
			return Answer{}, fmt.Errorf("reading from %s: %w", u.label, err)
		}
		clean = true
		return Answer{Msg: r}, nil
	}
}

// conn takes a socket from the free list or opens one.
func (u *UDP) conn(ctx context.Context) (*udpConn, error) {
	u.mu.Lock()
	if n := len(u.idle); n > 0 {
		c := u.idle[n-1]
		u.idle[n-1] = nil
		u.idle = u.idle[:n-1]
		u.mu.Unlock()
		return c, nil
	}
	u.mu.Unlock()

	nc, err := u.dialer.DialContext(ctx, "udp", u.addr)
	if err != nil {
		return nil, ioError(ctx, "dialing", u.label, err)
	}
	u.dials.Add(1)
	return &udpConn{Conn: nc}, nil
}

// put returns a clean socket to the free list, or closes it when the list
// is full or the transport closed.
func (u *UDP) put(c *udpConn) {
	u.mu.Lock()
	if !u.closed && len(u.idle) < u.maxIdle {
		u.idle = append(u.idle, c)
		c = nil
	}
	u.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// Close closes the idle sockets and the TCP fallback's idle connections.
// Exchanges in flight finish (their contexts bound them) and close their
// sockets instead of keeping them; later exchanges still work but keep no
// socket. Close starts nothing and leaves nothing running.
func (u *UDP) Close() error {
	u.mu.Lock()
	idle := u.idle
	u.idle = nil
	u.closed = true
	u.mu.Unlock()

	// Close sockets after releasing the lock.
	for _, c := range idle {
		_ = c.Close()
	}
	return u.tcp.Close()
}

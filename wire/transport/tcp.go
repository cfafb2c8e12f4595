package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// TCP exchanges queries with one upstream over TCP, the "tcp://IP:PORT"
// address form, with the two-byte length framing of RFC 1035 4.2.2.
//
// Connections persist between exchanges (RFC 7766), one exchange per
// connection at a time, on a bounded idle list whose connections expire
// after the idle timeout. When an exchange on a reused connection fails
// before any answer byte arrived — the server had closed the idle
// connection: EOF, reset, broken pipe — it is redialled once within the same
// context: a stale pooled connection is never blamed on the upstream.
//
// A TCP is safe for concurrent use.
type TCP struct {
	addr        string // IP:PORT
	label       string // "tcp://IP:PORT", naming the upstream in errors
	maxIdle     int
	idleTimeout time.Duration
	dialer      net.Dialer

	// slots holds one token per exchange in flight, at most maxConns. As a
	// connection is dialled only when no idle one is left, every open
	// connection is either idle or held by a token holder: the tokens bound
	// the open connections too.
	slots chan struct{}

	dials atomic.Uint64 // connections opened, so tests can prove reuse

	mu     sync.Mutex // guards following
	idle   []*tcpConn // the oldest first
	sweep  idleSweep  // of the idle connections
	closed bool       // Close was called: connections are closed on return
}

var _ Transport = (*TCP)(nil)

// tcpConn is a connection to the upstream. Only the exchange that holds it
// touches it, or the idle list while it is idle.
type tcpConn struct {
	net.Conn
	idleSince time.Time // when it was last returned to the idle list
	prefix    [2]byte   // the answer's length, read here to spare an allocation
}

// NewTCP returns a transport to the upstream at addr (IP:PORT). It opens no
// connection until the first exchange and starts no goroutine.
func NewTCP(addr string, opts ...Option) *TCP {
	o := buildOptions(opts)
	return &TCP{
		addr:        addr,
		label:       "tcp://" + addr,
		maxIdle:     o.maxIdle,
		idleTimeout: o.idleTimeout,
		slots:       make(chan struct{}, o.maxConns),
	}
}

// Exchange sends q and returns its answer as a Msg, as the Exchanger
// contract says. Waiting for a connection when WithMaxConns are busy counts
// against expiry. Errors name the upstream and keep their chain for
// errors.Is.
func (t *TCP) Exchange(ctx context.Context, q *Query, expiry time.Time) (Answer, error) {
	if err := ctx.Err(); err != nil {
		return Answer{}, fmt.Errorf("exchanging with %s: %w", t.label, err)
	}
	deadline := bound(ctx, expiry)
	select {
	case t.slots <- struct{}{}:
	default:
		// Every connection is busy: only this wait costs a timer.
		wctx, cancel := withExpiry(ctx, deadline)
		select {
		case t.slots <- struct{}{}:
			cancel()
		case <-wctx.Done():
			cancel()
			return Answer{}, fmt.Errorf("waiting for a connection to %s: %w", t.label, wctx.Err())
		}
	}
	defer func() { <-t.slots }()

	buf := getBuf(largeBufLen)
	defer putBuf(buf)
	id := newWireID()
	frame, err := frameQuery(q.Packed, id, buf)
	if err != nil {
		return Answer{}, err
	}

	for fresh := false; ; fresh = true {
		c, reused, err := t.conn(ctx, deadline, fresh)
		if err != nil {
			return Answer{}, err
		}
		// The answer is read into buf only after its length arrived, so
		// a retry finds frame intact.
		r, replied, err := t.roundTrip(ctx, deadline, c, q.Msg, id, frame, buf)
		if err != nil && reused && !replied && ctx.Err() == nil && isStale(err) {
			continue // fresh is true from now on: at most one redial
		}
		return Answer{Msg: r}, err
	}
}

// frameQuery copies packed into buf behind its two-byte length, with wire
// ID id in place of its own.
func frameQuery(packed []byte, id uint16, buf []byte) ([]byte, error) {
	if len(packed) < dnsmsg.HeaderLen || len(packed) > maxMsgLen {
		return nil, fmt.Errorf("%w: a %d-byte query", ErrPack, len(packed))
	}
	n := copy(buf[2:], packed)
	binary.BigEndian.PutUint16(buf, uint16(n))
	binary.BigEndian.PutUint16(buf[2:], id)
	return buf[:2+n], nil
}

// roundTrip writes frame on c and reads the answer into buf. It owns c: c
// returns to the idle list after a clean exchange and is closed otherwise.
// replied reports whether any byte of an answer arrived.
func (t *TCP) roundTrip(ctx context.Context, deadline time.Time, c *tcpConn, m *dns.Msg, id uint16, frame, buf []byte) (r *dns.Msg, replied bool, err error) {
	stop := watch(ctx, c, deadline)
	defer func() {
		if stop() && err == nil {
			t.put(c)
		} else {
			_ = c.Close()
		}
	}()

	if _, err := c.Write(frame); err != nil {
		return nil, false, ioError(ctx, "writing to", t.label, err)
	}
	if n, err := io.ReadFull(c, c.prefix[:]); err != nil {
		return nil, n > 0, ioError(ctx, "reading from", t.label, err)
	}
	raw := buf[:binary.BigEndian.Uint16(c.prefix[:])]
	if _, err := io.ReadFull(c, raw); err != nil {
		return nil, true, ioError(ctx, "reading from", t.label, err)
	}
	r, err = decodeReply(m, id, raw)
	if err != nil {
		return nil, true, fmt.Errorf("reading from %s: %w", t.label, err)
	}
	return r, true, nil
}

// isStale reports whether err is how a connection the server already closed
// fails: EOF, reset, broken pipe.
func isStale(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// conn takes the most recently used idle connection, unless fresh, or dials
// one. reused reports a connection from the idle list.
func (t *TCP) conn(ctx context.Context, deadline time.Time, fresh bool) (c *tcpConn, reused bool, err error) {
	if !fresh {
		t.mu.Lock()
		if n := len(t.idle); n > 0 {
			c = t.idle[n-1]
			t.idle[n-1] = nil
			t.idle = t.idle[:n-1]
		}
		t.mu.Unlock()
		if c != nil {
			if time.Since(c.idleSince) < t.idleTimeout {
				return c, true, nil
			}
			// Expired but not yet swept; the others are older still and
			// the sweep will take them.
			_ = c.Close()
		}
	}
	d := t.dialer
	d.Deadline = deadline
	nc, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, false, ioError(ctx, "dialing", t.label, err)
	}
	t.dials.Add(1)
	return &tcpConn{Conn: nc}, false, nil
}

// put returns a clean connection to the idle list, or closes it when the
// list is full or the transport closed.
func (t *TCP) put(c *tcpConn) {
	t.mu.Lock()
	if !t.closed && len(t.idle) < t.maxIdle {
		c.idleSince = time.Now()
		t.idle = append(t.idle, c)
		c = nil
		if !t.sweep.armed {
			t.sweep.armLocked(t.idleTimeout, t.expireIdle)
		}
	}
	t.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// expireIdle closes the connections idle for the idle timeout at now and
// schedules itself for the next one to expire. It is the expiry timer's
// body; tests call it with a clock of their own.
func (t *TCP) expireIdle(now time.Time) {
	t.mu.Lock()
	i := 0
	for i < len(t.idle) && now.Sub(t.idle[i].idleSince) >= t.idleTimeout {
		i++
	}
	expired := make([]*tcpConn, i)
	copy(expired, t.idle[:i])
	n := copy(t.idle, t.idle[i:])
	clear(t.idle[n:])
	t.idle = t.idle[:n]
	t.sweep.armed = false
	if len(t.idle) > 0 && !t.closed {
		t.sweep.armLocked(t.idle[0].idleSince.Add(t.idleTimeout).Sub(now), t.expireIdle)
	}
	t.mu.Unlock()

	// Close connections after releasing the lock.
	for _, c := range expired {
		_ = c.Close()
	}
}

// Close closes the idle connections and stops the expiry timer. Exchanges
// in flight finish (their contexts bound them) and close their connections
// instead of keeping them; later exchanges still work but keep no
// connection. After Close returns no goroutine of the transport is left,
// save an expiry sweep already running, which finds nothing to do.
func (t *TCP) Close() error {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.closed = true
	t.sweep.stopLocked()
	t.mu.Unlock()

	// Close connections after releasing the lock.
	for _, c := range idle {
		_ = c.Close()
	}
	return nil
}

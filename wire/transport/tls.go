package transport

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// TLS exchanges queries with one upstream over DNS over TLS, the
// "tls://HOST:PORT" address form (RFC 7858): TCP framing (RFC 1035 4.2.2)
// inside TLS 1.2 or later, the certificate verified for HOST.
//
// It keeps a few persistent connections (DefaultPipelineConns) and pipelines
// queries on them (RFC 7766 6.2.1.1): many in flight on one connection,
// each under a wire ID unique on it, answers matched by ID in whatever order
// they come. An exchange takes an idle connection, else dials one while
// fewer than the bound are open, else shares the least busy. Each
// connection has one reader goroutine handing answers to their exchanges.
//
// A query's failure stays its own wherever that is possible:
//   - A cancelled exchange withdraws only itself. Its wire ID stays
//     reserved until its answer arrives, so a late answer cannot pass for
//     another query's.
//   - An exchange whose deadline passes without its answer retires the
//     connection: it is handed to no new exchange, the exchanges already on
//     it keep waiting for their answers within their own deadlines, and it
//     is closed when the last of them ends. A server that stalls one query
//     is not trusted with the next.
//   - A connection that fails — reset, closed, an answer no query asked for,
//     a failed write — fails every exchange on it with that error: they have
//     all lost their answers. When it closed before any byte of an answer
//     and was up before the exchange chose it, the exchange redials instead
//     (the server closed an idle connection as the query went out), as TCP
//     does for its pooled connections.
//
// Connections idle for the idle timeout (DefaultTLSIdleTimeout) are closed.
//
// A TLS is safe for concurrent use.
type TLS struct {
	label       string     // "tls://HOST:PORT", naming the upstream in errors
	hd          hostDialer // where to dial: the pinned ip, or HOST looked up
	conf        *tls.Config
	maxConns    int
	idleTimeout time.Duration

	// mu guards the fields below and the fields of every dotConn marked so.
	// One lock for the transport and its few connections: an exchange holds
	// it for a map operation, never across I/O.
	mu     sync.Mutex
	conns  []*dotConn            // what new exchanges may use, dialling ones included; at most maxConns
	open   map[*dotConn]struct{} // connections whose reader runs, in conns or retired
	sweep  idleSweep             // of the idle connections
	closed bool                  // Close was called: no connection is kept

	waits sync.Pool // *dotWait, its channel empty: one per exchange

}

var _ Transport = (*TLS)(nil)

// NewTLS returns a DoT transport to the server at addr, a tls:// address
// (see ParseAddress). Its HOST is the name the certificate must carry;
// WithDialIP pins the address dialled, WithResolver looks HOST up when it
// is a name and no address is pinned, WithRootCAs chooses the roots. It
// opens no connection until the first exchange and starts no goroutine; it
// fails only when addr is not a tls:// address.
func NewTLS(addr Address, opts ...Option) (*TLS, error) {
	o, hd, conf, err := tlsSetup(addr, "tls", opts)
	if err != nil {
		return nil, err
	}
	return &TLS{
		label:       addr.String(),
		hd:          hd,
		conf:        conf,
		maxConns:    o.pipelineConns,
		idleTimeout: o.idleTimeoutOr(DefaultTLSIdleTimeout),
		open:        make(map[*dotConn]struct{}),
	}, nil
}

// Exchange sends q and returns its answer, as the Exchanger contract
// says: expiry and ctx bound the dial and handshake, waiting for a
// connection that another exchange is dialling, the write and the answer.
// q.Packed goes out in a frame with a wire ID of the connection's, and an
// answer whose bytes LayoutAnswer vouches for, and that fits q.Buf, comes
// back there as it was read; any other answer is parsed and returned as
// Msg. Errors name the upstream and keep their chain for errors.Is and
// errors.As: the sentinels of this package, context errors, syscall
// errors, and crypto/tls and crypto/x509 errors for a failed handshake or
// verification (tls.CertificateVerificationError).
func (t *TLS) Exchange(ctx context.Context, q *Query, expiry time.Time) (Answer, error) {
	if err := ctx.Err(); err != nil {
		return Answer{}, fmt.Errorf("exchanging with %s: %w", t.label, err)
	}
	if len(q.Packed) < dnsmsg.HeaderLen || len(q.Packed) > maxMsgLen {
		return Answer{}, fmt.Errorf("%w: a %d-byte query", ErrPack, len(q.Packed))
	}
	buf := getBuf(2 + len(q.Packed))
	defer putBuf(buf)
	frame := buf[:2+copy(buf[2:], q.Packed)]
	binary.BigEndian.PutUint16(frame, uint16(len(q.Packed)))

	raw, id, err := t.roundTrip(ctx, bound(ctx, expiry), frame)
	if err != nil {
		return Answer{}, err
	}
	defer putBuf(raw)
	if len(raw) <= cap(q.Buf) {
		if l, ok := dnsmsg.LayoutAnswer(frame[2:], raw, id); ok {
			return Answer{Raw: q.Buf[:copy(q.Buf[:cap(q.Buf)], raw)], Layout: l}, nil
		}
	}
	r, err := decodeReply(q.Msg, id, raw)
	if err != nil {
		return Answer{}, fmt.Errorf("reading from %s: %w", t.label, err)
	}
	return Answer{Msg: r}, nil
}

// roundTrip sends frame (a query behind its length, the wire ID to be set)
// on a connection and returns the answer's bytes, in a buffer from getBuf
// that the caller gives back with putBuf, and the ID they must carry.
// deadline (zero: none) bounds it all. Each stale connection met costs one
// retry, and each one met is gone: maxConns retries cover every connection
// having been closed at once.
func (t *TLS) roundTrip(ctx context.Context, deadline time.Time, frame []byte) (raw []byte, id uint16, err error) {
	for tries := 0; ; tries++ {
		c, reused, err := t.acquire(ctx, deadline)
		if err != nil {
			return nil, 0, err
		}
		raw, id, stale, err := c.exchange(ctx, deadline, frame)
		if err != nil && stale && reused && tries < t.maxConns && ctx.Err() == nil {
			continue
		}
		return raw, id, err
	}
}

// acquire chooses the connection for one exchange and holds it for the
// exchange (dotConn.inflight), dialling it when it is new. reused reports
// a connection that was up before the exchange chose it. On error nothing
// is held.
func (t *TLS) acquire(ctx context.Context, deadline time.Time) (*dotConn, bool, error) {
	for {
		t.mu.Lock()
		c, dial := t.pickLocked()
		c.inflight++
		t.mu.Unlock()

		reused := false
		if !dial {
			select {
			case <-c.ready:
				reused = true
			default:
			}
		}
		if !reused {
			// Only a connection not yet up costs a timer: the dial, and
			// waiting for another exchange's dial, under the deadline.
			dctx, cancel := withExpiry(ctx, deadline)
			if dial {
				t.dial(dctx, c)
			}
			select {
			case <-c.ready:
				cancel()
			case <-dctx.Done():
				cancel()
				t.release(c, false)
				return nil, false, fmt.Errorf("waiting for a connection to %s: %w", t.label, dctx.Err())
			}
		}
		if c.err == nil {
			return c, reused, nil
		}
		t.release(c, false)
		if !dial && ctx.Err() == nil && isContextError(c.err) {
			// The exchange that dialled gave up, which says nothing about
			// the upstream: try again, dialling ourselves if need be.
			continue
		}
		// The upstream failed the dial (refused, handshake, certificate):
		// evidence for every exchange that waited on it.
		return nil, false, c.err
	}
}

// pickLocked chooses an idle connection, else a new one while fewer than
// maxConns are open, else the least busy. dial reports a new connection,
// which the caller must dial. After Close every exchange gets a connection
// of its own, closed when it ends.
func (t *TLS) pickLocked() (c *dotConn, dial bool) {
	if !t.closed {
		for _, cc := range t.conns {
			if c == nil || cc.inflight < c.inflight {
				c = cc
			}
		}
		if c != nil && (c.inflight == 0 || len(t.conns) >= t.maxConns) {
			return c, false
		}
	}
	c = newDotConn(t)
	if t.closed {
		c.retired = true
	} else {
		t.conns = append(t.conns, c)
	}
	return c, true
}

// dial connects and handshakes c under ctx, then starts its reader; it
// sets c.conn or c.err and closes c.ready either way.
func (t *TLS) dial(ctx context.Context, c *dotConn) {
	nc, err := t.connect(ctx)
	t.mu.Lock()
	if err != nil {
		c.err = ioError(ctx, "dialing", t.label, err)
		c.dead = true
		t.removeLocked(c)
		close(c.done) // no reader will run
	} else {
		c.conn = nc
		t.open[c] = struct{}{}
	}
	t.mu.Unlock()
	close(c.ready)
	if err == nil {
		go c.read()
		go c.writeLoop() // ends when the reader does
	}
}

// connect opens one connection under ctx and handshakes it, looking the
// host up first when no address is pinned: a failed lookup is
// ErrBootstrap, and ends before ctx's deadline (hostDialer.resolve).
func (t *TLS) connect(ctx context.Context) (*tls.Conn, error) {
	var addrs []netip.Addr
	if t.hd.needsLookup() {
		deadline, _ := ctx.Deadline()
		r, err := t.hd.resolve(ctx, deadline)
		if err != nil {
			return nil, err
		}
		addrs = r.Addrs
	}
	raw, err := t.hd.dial(ctx, addrs)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, t.conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, err
	}
	return tc, nil
}

// release ends one exchange's hold on c. retire hands c to no new exchange;
// a retired connection is closed when its last exchange releases it, and an
// idle one is scheduled for the idle sweep.
func (t *TLS) release(c *dotConn, retire bool) {
	t.mu.Lock()
	c.inflight--
	if retire && !c.retired {
		c.retired = true
		t.removeLocked(c)
	}
	closeNow := false
	if c.conn != nil && !c.dead && c.inflight == 0 {
		if c.retired {
			closeNow = true
		} else {
			c.idleSince = time.Now()
			if !t.sweep.armed && !t.closed {
				t.sweep.armLocked(t.idleTimeout, t.expireIdle)
			}
		}
	}
	t.mu.Unlock()

	// Close the connection after releasing the lock; its reader sees the
	// close and ends.
	if closeNow {
		_ = c.conn.Close()
	}
}

// removeLocked takes c out of the connections new exchanges may use.
func (t *TLS) removeLocked(c *dotConn) {
	if i := slices.Index(t.conns, c); i >= 0 {
		t.conns = slices.Delete(t.conns, i, i+1)
	}
}

// expireIdle closes the connections idle for the idle timeout at now and
// schedules itself for the next one to expire. It is the expiry timer's
// body; tests call it with a clock of their own.
func (t *TLS) expireIdle(now time.Time) {
	var expired []*dotConn
	t.mu.Lock()
	t.sweep.armed = false
	var next time.Time
	for _, c := range t.conns {
		if c.conn == nil || c.inflight > 0 {
			continue
		}
		if now.Sub(c.idleSince) >= t.idleTimeout {
			expired = append(expired, c)
		} else if until := c.idleSince.Add(t.idleTimeout); next.IsZero() || until.Before(next) {
			next = until
		}
	}
	for _, c := range expired {
		c.retired = true
		t.removeLocked(c)
	}
	if !next.IsZero() && !t.closed {
		t.sweep.armLocked(next.Sub(now), t.expireIdle)
	}
	t.mu.Unlock()

	// Close connections after releasing the lock.
	for _, c := range expired {
		_ = c.conn.Close()
	}
}

// Close closes the idle connections and waits for their readers to end.
// Exchanges in flight finish (their contexts bound them), and a connection
// in use closes when its last exchange ends, its reader a moment later.
// Later exchanges still work, each on a connection of its own that it
// closes. When Close is called with no exchange in flight, no goroutine of
// the transport is left when it returns, save an idle sweep already
// running, which finds nothing to do.
func (t *TLS) Close() error {
	t.mu.Lock()
	t.closed = true
	t.sweep.stopLocked()
	var idle []*dotConn
	for _, c := range t.conns {
		c.retired = true
	}
	t.conns = nil
	for c := range t.open {
		if c.inflight == 0 {
			idle = append(idle, c)
		}
	}
	t.mu.Unlock()

	// Close connections after releasing the lock, then wait for their
	// readers. One closed by a release or a sweep a moment ago is closed
	// again, harmlessly, and waited for alike.
	for _, c := range idle {
		_ = c.conn.Close()
	}
	for _, c := range idle {
		<-c.done
	}
	return nil
}

// isContextError reports whether err is a context's cancellation or expiry.
func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

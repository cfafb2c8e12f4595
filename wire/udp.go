package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// UDP exchanges queries with one upstream over UDP, the "udp://IP:PORT"
// address form. A truncated answer is retried over TCP to the same address
// within the same context: it is one attempt, whatever it takes. So is an
// answer larger than the exchange's buffer (at least ClientUDPSize of the
// query, which says EDNSSize): read whole, it is known to be too large, and
// is not charged as malformed.
//
// Exchanges share one connected socket, read by one goroutine of the
// transport's, which hands each datagram to the exchange whose wire ID it
// carries: no socket per query, no wakeup of the poller per answer. Every
// wire ID is used once per socket. A datagram whose ID no exchange is
// waiting for (a late answer, one sent twice, one with an ID never sent) is
// dropped: on a shared socket it is evidence against no exchange, and
// failing the exchanges in flight on it would hand anyone who can spoof
// one datagram to the socket's port a way to make the upstream look down.
// An upstream that answers with wrong IDs only lets its exchanges expire.
// After udpSocketIDs exchanges a socket is retired for a new one, on a new
// random source port, and closed once its last exchange ends.
//
// A UDP is safe for concurrent use.
type UDP struct {
	addr      string // IP:PORT
	label     string // "udp://IP:PORT", naming the upstream in errors
	tcp       *TCP   // the truncation fallback to the same address; always non-nil
	dialer    net.Dialer
	socketIDs int // exchanges per socket before it is retired: udpSocketIDs, less in tests

	dials atomic.Uint64 // sockets opened, so tests can prove reuse
	waits sync.Pool     // *udpWait

	readers sync.WaitGroup // one per socket

	mu     sync.Mutex            // guards following, and every udpSock's and udpWait's fields
	cur    *udpSock              // the socket new exchanges register on; nil before the first
	socks  map[*udpSock]struct{} // every open socket, cur and retired
	closed bool                  // Close was called
}

var _ Transport = (*UDP)(nil)

// udpSocketIDs is how many exchanges one socket carries before it is
// retired: a bound on the IDs it has used, and how often the source port
// changes (an off-path spoofer has to match the port as well as the ID).
const udpSocketIDs = 4096

// maxUDPPayload is the most a UDP datagram carries over IPv4 (65535 less
// the IP and UDP headers): a larger query is ours to refuse, not the
// upstream's fault.
const maxUDPPayload = 65507

// udpSocketBuffer is the receive buffer a shared socket asks for: about a
// thousand small answers at once, the kernel's own per-datagram overhead
// included.
const udpSocketBuffer = 1 << 20

// udpSock is one connected socket of a UDP transport.
type udpSock struct {
	conn    net.Conn
	ids     udpIDs    // every ID used on it (never reused), and the exchanges waiting
	retired bool      // takes no new exchange; closed when none waits
	armed   time.Time // the read deadline set on conn: the earliest deadline of its waits or their next poll; zero: none
}

// udpWait is one exchange waiting for its answer. The reader writes into
// buf only while the exchange is registered and only once (n == 0 and err
// nil), under the transport's lock, and then signals ready; the exchange
// reads n, err and buf after ready, which orders them after the writes.
type udpWait struct {
	buf      []byte          // the exchange's buffer; the datagram is copied to buf[:cap(buf)], as much as fits
	n        int             // the datagram's length once delivered, which may exceed cap(buf)
	err      error           // a socket or context error delivered instead of a datagram
	ready    chan struct{}   // capacity 1: signalled on delivery
	ctx      context.Context // the exchange's, polled by the reader for cancellation (see expire)
	deadline time.Time       // when the reader ends the wait; zero for none
}

// NewUDP returns a transport to the upstream at addr (IP:PORT). It opens no
// socket until the first exchange; the options tune the TCP fallback.
func NewUDP(addr string, opts ...Option) *UDP {
	return &UDP{
		addr:      addr,
		label:     "udp://" + addr,
		tcp:       NewTCP(addr, opts...),
		socketIDs: udpSocketIDs,
		socks:     make(map[*udpSock]struct{}),
	}
}

// Exchange sends q and returns its answer, retrying over TCP when the
// answer is truncated, as the Exchanger contract says: q.Packed goes out
// with a wire ID of the socket's, and an answer whose bytes LayoutAnswer
// vouches for comes back in q.Buf as it was read. Any other answer is
// parsed and returned as Msg. Errors name the upstream and keep their
// chain: the sentinels of this package, context errors, net timeouts and
// syscall errors (a closed port reports syscall.ECONNREFUSED) all match
// with errors.Is.
func (u *UDP) Exchange(ctx context.Context, q *Query, expiry time.Time) (Answer, error) {
	a, err := u.exchangeDatagram(ctx, q, expiry)
	if err != nil || a.Msg == nil || !a.Msg.Truncated {
		return a, err
	}
	return u.tcp.Exchange(ctx, q, expiry)
}

// exchangeDatagram is Exchange without the TCP fallback: a truncated answer
// is returned as it came, or as a bare truncated header when it did not
// even parse (some servers cut records in half). The forward-zone client
// drives the fallback itself.
func (u *UDP) exchangeDatagram(ctx context.Context, q *Query, expiry time.Time) (Answer, error) {
	if len(q.Packed) < HeaderLen || len(q.Packed) > maxUDPPayload {
		return Answer{}, fmt.Errorf("%w: a %d-byte query", ErrPack, len(q.Packed))
	}
	if cap(q.Buf) >= ClientUDPSize(q.Msg) {
		// The whole buffer: some servers send more than the query's EDNS
		// size allows, and an answer cut short would be lost.
		return u.send(ctx, q.Msg, q.Packed, q.Buf[:cap(q.Buf)], bound(ctx, expiry), true)
	}
	buf := getBuf(ClientUDPSize(q.Msg))
	defer putBuf(buf)
	return u.send(ctx, q.Msg, q.Packed, buf, bound(ctx, expiry), false)
}

// send writes query, m packed, with a wire ID of its own in its first two
// bytes, and waits for the answer, which the socket's reader copies into
// buf. With raw, an answer that LayoutAnswer vouches for is returned as
// bytes; every other answer is parsed. A truncated answer is returned as it
// came, or as a bare truncated header when it did not even parse.
//
// The socket's reader bounds the wait: it wakes at the deadline (zero:
// none) and polls ctx's Err every cancelPoll (see expire), so that the
// exchange waits on one channel and arms no timer of its own.
func (u *UDP) send(ctx context.Context, m *dns.Msg, query, buf []byte, deadline time.Time, raw bool) (Answer, error) {
	if err := ctx.Err(); err != nil {
		return Answer{}, fmt.Errorf("exchanging with %s: %w", u.label, err)
	}
	w := u.getWait(buf)
	w.ctx, w.deadline = ctx, deadline
	s, id, err := u.register(ctx, w)
	if err != nil {
		u.putWait(w)
		return Answer{}, err
	}
	defer u.unregister(s, id, w)
	binary.BigEndian.PutUint16(query, id)
	if _, err := s.conn.Write(query); err != nil {
		// A write reports the ICMP error an earlier datagram earned, if
		// the reader has not taken it yet, and sends nothing: that error
		// is the earlier query's (icmp ties it there), so this one is sent
		// again. A second failure is this write's own.
		if !isICMPError(err) {
			return Answer{}, ioError(ctx, "writing to", u.label, err)
		}
		if _, err := s.conn.Write(query); err != nil {
			return Answer{}, ioError(ctx, "writing to", u.label, err)
		}
	}
	<-w.ready
	return u.answer(ctx, m, query, buf, id, w, raw)
}

// answer decides what the datagram or error delivered to w means.
func (u *UDP) answer(ctx context.Context, m *dns.Msg, query, buf []byte, id uint16, w *udpWait, raw bool) (Answer, error) {
	n, err := w.n, w.err // ordered after the reader's writes by ready
	if err != nil {
		return Answer{}, ioError(ctx, "reading from", u.label, err)
	}
	if n > cap(buf) && Flags(buf[:cap(buf)])&FlagQR != 0 {
		// Larger than anything we asked for (our query said
		// EDNSSize, and the buffer holds more): cut short, it would
		// only parse as malformed. A truncated answer, which TCP
		// carries whole. Forged, it costs a TCP exchange, no more.
		return Answer{Msg: &dns.Msg{MsgHdr: dns.MsgHdr{Id: m.Id, Response: true, Truncated: true}}}, nil
	}
	b := buf[:cap(buf)][:min(n, cap(buf))]
	if raw && !truncatedHeader(b) {
		if l, ok := LayoutAnswer(query, b, id); ok {
			return Answer{Raw: b, Layout: l}, nil
		}
	}
	r, err := decodeReply(m, id, b)
	if errors.Is(err, ErrMalformed) && truncatedHeader(b) {
		// Our ID (decodeReply checked it), cut short: TCP will carry
		// the whole answer.
		return Answer{Msg: &dns.Msg{MsgHdr: dns.MsgHdr{Id: m.Id, Response: true, Truncated: true}}}, nil
	}
	if err != nil {
		return Answer{}, fmt.Errorf("reading from %s: %w", u.label, err)
	}
	return Answer{Msg: r}, nil
}

// register files w under a fresh wire ID on the current socket, opening a
// new socket when there is none or the current one is spent.
func (u *UDP) register(ctx context.Context, w *udpWait) (*udpSock, uint16, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, 0, fmt.Errorf("exchanging with %s: %w", u.label, net.ErrClosed)
	}
	s := u.cur
	if s == nil || s.retired || s.ids.count >= u.socketIDs {
		if s != nil {
			u.retire(s)
		}
		// Dialling UDP sends nothing: it binds a port and sets the
		// peer, so holding the lock over it costs no round trip.
		nc, err := u.dialer.DialContext(ctx, "udp", u.addr)
		if err != nil {
			return nil, 0, ioError(ctx, "dialing", u.label, err)
		}
		u.dials.Add(1)
		if uc, ok := nc.(*net.UDPConn); ok {
			// Every answer in flight queues on this one socket: ask for
			// room for a burst (the kernel caps it at net.core.rmem_max).
			_ = uc.SetReadBuffer(udpSocketBuffer)
			recvICMPErrors(uc)
		}
		s = &udpSock{conn: nc}
		u.cur = s
		u.socks[s] = struct{}{}
		u.readers.Add(1)
		go u.read(s)
	}
	id := s.ids.add(w)
	if wake, sooner := wakeFor(s.armed, w.deadline); sooner {
		s.arm(wake)
	}
	return s, id, nil
}

// arm has s's reader wake at t (zero: never) to look at its waits.
// The caller holds u.mu.
func (s *udpSock) arm(t time.Time) {
	s.armed = t
	_ = s.conn.SetReadDeadline(t) // fails only on a closed socket, whose reader is ending
}

// unregister ends w's exchange on s: its ID stays used, with no one
// waiting, so that a late answer is dropped and the ID never comes back on
// this socket; a retired socket whose last exchange this was is closed.
func (u *UDP) unregister(s *udpSock, id uint16, w *udpWait) {
	u.mu.Lock()
	s.ids.remove(id)
	closing := s.retired && s.ids.live == 0
	if closing {
		delete(u.socks, s)
	}
	u.mu.Unlock()
	if closing {
		_ = s.conn.Close() // its reader ends
	}
	u.putWait(w)
}

// retire takes s out of service: no new exchange registers on it, and it
// is closed when its last one ends. The caller holds u.mu.
func (u *UDP) retire(s *udpSock) {
	s.retired = true
	if u.cur == s {
		u.cur = nil
	}
	if s.ids.live == 0 {
		delete(u.socks, s)
		_ = s.conn.Close()
	}
}

// read is s's reader: it hands each datagram to the exchange whose ID it
// carries, until s is closed.
func (u *UDP) read(s *udpSock) {
	defer u.readers.Done()
	buf := getBuf(maxMsgLen)
	defer putBuf(buf)
	for {
		n, err := s.conn.Read(buf)
		if errors.Is(err, net.ErrClosed) {
			u.fail(s, err)
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			u.expire(s)
			continue
		}
		if err != nil {
			// An ICMP error (a closed port: ECONNREFUSED), which anyone
			// on the path can forge. It costs only the exchanges whose
			// queries it quotes, never every exchange on the socket.
			u.icmp(s, err)
			continue
		}
		if n < 2 {
			continue // no ID: nobody's
		}
		id := binary.BigEndian.Uint16(buf)
		u.mu.Lock()
		w := s.ids.get(id)
		if w != nil && w.n == 0 && w.err == nil {
			// A datagram larger than the exchange's buffer keeps its
			// length, so that the exchange sees it was cut (see answer).
			copy(w.buf[:cap(w.buf)], buf[:n])
			w.n = n
			w.ready <- struct{}{}
		}
		u.mu.Unlock()
	}
}

// expire is s's reader waking at the time it was armed for: every wait on
// s whose deadline has passed gets context.DeadlineExceeded, every wait
// whose context has ended gets the context's error, and the reader is armed
// again for the earliest deadline of the others or the next cancellation
// poll, whichever is first. Waits end at their deadline, as a timer of
// their own would end them, and notice a cancellation within cancelPoll.
func (u *UDP) expire(s *udpSock) {
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	var next time.Time
	for _, e := range s.ids.table {
		w := e.w
		if w == nil || w.n != 0 || w.err != nil {
			continue
		}
		if err := waitEnded(w.ctx, w.deadline, now); err != nil {
			w.err = err
			w.ready <- struct{}{}
			continue
		}
		next = foldWake(next, now, w.deadline)
	}
	s.arm(next)
}

// icmp delivers err, an ICMP error the socket reported, to the exchanges
// whose queries the errors queued on s quote (see quotedIDs), and to no
// other: one forged datagram must not fail every exchange on a shared
// socket, each of them a recorded failure of the upstream. An ICMP error
// that quotes no query of ours fails nothing; its exchange, if any, waits
// for its answer or its deadline.
func (u *UDP) icmp(s *udpSock, err error) {
	uc, ok := s.conn.(*net.UDPConn)
	if !ok {
		return
	}
	var buf [8]uint16
	ids := quotedIDs(uc, buf[:0])
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, id := range ids {
		if w := s.ids.get(id); w != nil && w.n == 0 && w.err == nil {
			w.err = err
			w.ready <- struct{}{}
		}
	}
}

// fail delivers err to every exchange waiting on s: its socket is closed.
func (u *UDP) fail(s *udpSock, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, e := range s.ids.table {
		if w := e.w; w != nil && w.n == 0 && w.err == nil {
			w.err = err
			w.ready <- struct{}{}
		}
	}
}

// isICMPError reports whether err is how a socket reports an ICMP error
// that reached it: port or host unreachable, and the like.
func isICMPError(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTDOWN) ||
		errors.Is(err, syscall.EPROTO)
}

// getWait returns a registration for an exchange reading into buf.
func (u *UDP) getWait(buf []byte) *udpWait {
	w, ok := u.waits.Get().(*udpWait)
	if !ok {
		w = &udpWait{ready: make(chan struct{}, 1)}
	}
	w.buf = buf
	return w
}

// putWait keeps w for another exchange; nothing refers to it any more.
func (u *UDP) putWait(w *udpWait) {
	select {
	case <-w.ready:
	default:
	}
	w.buf, w.n, w.err, w.ctx, w.deadline = nil, 0, nil, nil, time.Time{}
	u.waits.Put(w)
}

// Close closes the sockets, which fails the exchanges waiting on them with
// net.ErrClosed, waits for their readers to end, and closes the TCP
// fallback's idle connections. Exchanges after Close fail.
func (u *UDP) Close() error {
	u.mu.Lock()
	u.closed = true
	u.cur = nil
	socks := u.socks
	u.socks = make(map[*udpSock]struct{})
	u.mu.Unlock()

	for s := range socks {
		_ = s.conn.Close()
	}
	u.readers.Wait()
	return u.tcp.Close()
}

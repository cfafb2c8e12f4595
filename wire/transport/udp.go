package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// UDP exchanges queries with one upstream over UDP, the "udp://IP:PORT"
// address form. A truncated answer is retried over TCP to the same address
// within the same context: it is one attempt, whatever it takes. So is an
// answer larger than the exchange's buffer (at least ClientUDPSize of the
// query, which says EDNSSize): read whole, it is known to be too large, and
// is not charged as malformed.
//
// Every exchange has a source port of its own, which the kernel picks at
// random, and a random wire ID; the port is released when the exchange
// ends (RFC 5452 section 9.2). An off-path spoofer has to match the port
// of a query it cannot see (about 15 bits on Linux's default ephemeral
// range) as well as its ID (16), and a port it has seen used tells it
// nothing about the next. A datagram without the exchange's ID (one sent
// twice, a forged one) is dropped, and the exchange goes on waiting: an
// upstream that answers with wrong IDs only lets its exchanges expire. A
// late answer finds its port closed.
//
// On Linux the sockets are recycled, each connected to a new port per
// exchange, and waited for by one goroutine of the transport's through an
// epoll instance of its own (udpPoller): an exchange arms no timer and
// allocates nothing. Elsewhere each exchange opens a socket and reads it
// itself (udpDialer).
//
// A UDP is safe for concurrent use.
type UDP struct {
	addr   string // IP:PORT
	label  string // "udp://IP:PORT", naming the upstream in errors
	tcp    *TCP   // the truncation fallback to the same address; always non-nil
	dialer *udpDialer
	peer   netip.AddrPort // addr parsed; invalid when it is a name, which only the dialer resolves
	// portable: every exchange through the dialer, never the poller (no
	// poller on this platform, a peer given by name, or a test of the
	// dialer). Fixed at construction.
	portable bool

	dials atomic.Uint64 // ports used (sockets connected), so tests can count them

	poller   atomic.Pointer[udpPoller] // nil until the first exchange that needs it
	restarts atomic.Uint64             // pollers replaced after their goroutine ended on its own

	mu     sync.Mutex // guards closed and the poller's creation
	closed bool       // Close was called
}

var _ Transport = (*UDP)(nil)

// maxUDPPayload is the most a UDP datagram carries over IPv4 (65535 less
// the IP and UDP headers): a larger query is ours to refuse, not the
// upstream's fault.
const maxUDPPayload = 65507

// NewUDP returns a transport to the upstream at addr (IP:PORT). It opens no
// socket until the first exchange; the options tune the TCP fallback.
func NewUDP(addr string, opts ...Option) *UDP {
	u := &UDP{
		addr:  addr,
		label: "udp://" + addr,
		tcp:   NewTCP(addr, opts...),
	}
	u.dialer = &udpDialer{addr: addr, label: u.label, dials: &u.dials}
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		u.peer = ap
	}
	u.portable = !havePoller || !u.peer.IsValid()
	return u
}

// Exchange sends q and returns its answer, retrying over TCP when the
// answer is truncated, as the Exchanger contract says: q.Packed goes out
// with a random wire ID, and an answer whose bytes LayoutAnswer vouches
// for comes back in q.Buf as it was read. Any other answer is parsed and
// returned as Msg. Errors name the upstream and keep their chain: the
// sentinels of this package, context errors, net timeouts and syscall
// errors (a closed port reports syscall.ECONNREFUSED) all match with
// errors.Is.
func (u *UDP) Exchange(ctx context.Context, q *Query, expiry time.Time) (Answer, error) {
	return exchangeFallingBack(ctx, q, expiry, (*udpDatagrams)(u), u.tcp)
}

// exchangeFallingBack asks datagram, then stream when datagram's answer is
// truncated, both within expiry: the one TCP fallback, UDP.Exchange's,
// which the forward-zone client (query/forward) exchanges through too.
func exchangeFallingBack(ctx context.Context, q *Query, expiry time.Time, datagram, stream Exchanger) (Answer, error) {
	a, err := datagram.Exchange(ctx, q, expiry)
	if err != nil || a.Msg == nil || !a.Msg.Truncated {
		return a, err
	}
	return stream.Exchange(ctx, q, expiry)
}

// udpDatagrams is a UDP transport without its TCP fallback: a truncated
// answer is returned as it came, or as a bare truncated header when it did
// not even parse (some servers cut records in half).
type udpDatagrams UDP

// Exchange is UDP.Exchange but for the TCP fallback.
func (d *udpDatagrams) Exchange(ctx context.Context, q *Query, expiry time.Time) (Answer, error) {
	u := (*UDP)(d)
	if len(q.Packed) < dnsmsg.HeaderLen || len(q.Packed) > maxUDPPayload {
		return Answer{}, fmt.Errorf("%w: a %d-byte query", ErrPack, len(q.Packed))
	}
	if cap(q.Buf) >= dnsmsg.ClientUDPSize(q.Msg) {
		// The whole buffer: some servers send more than the query's EDNS
		// size allows, and an answer cut short would be lost.
		return u.send(ctx, q.Msg, q.Packed, q.Buf[:cap(q.Buf)], bound(ctx, expiry), true)
	}
	buf := getBuf(dnsmsg.ClientUDPSize(q.Msg))
	defer putBuf(buf)
	return u.send(ctx, q.Msg, q.Packed, buf, bound(ctx, expiry), false)
}

// send writes query, m packed, with a random wire ID in its first two
// bytes, on a socket of its own, and waits for the answer, which is read
// into buf. With raw, an answer that LayoutAnswer vouches for is returned
// as bytes; every other answer is parsed. A truncated answer is returned as
// it came, or as a bare truncated header when it did not even parse.
//
// The wait ends at deadline (zero: none), and within cancelPoll of ctx's
// cancellation.
func (u *UDP) send(ctx context.Context, m *dns.Msg, query, buf []byte, deadline time.Time, raw bool) (Answer, error) {
	if err := ctx.Err(); err != nil {
		return Answer{}, fmt.Errorf("exchanging with %s: %w", u.label, err)
	}
	s, err := u.sockets()
	if err != nil {
		return Answer{}, err
	}
	id := newWireID()
	binary.BigEndian.PutUint16(query, id)
	n, err := s.exchange(ctx, query, buf, id, deadline)
	if err != nil {
		return Answer{}, err
	}
	return u.answer(m, query, buf, id, n, raw)
}

// udpSockets is how a UDP transport sends a query on a socket of its own
// and waits for the answer: the poller on Linux, the dialer anywhere.
type udpSockets interface {
	// exchange opens a socket connected to the upstream, writes query
	// (which carries id), and reads the first datagram that carries id
	// into buf[:cap(buf)], as much as fits; it returns the datagram's
	// whole length, which may exceed cap(buf). Datagrams with another ID
	// are dropped. The wait ends at deadline (zero: none) or within
	// cancelPoll of ctx's end, with a context error. Errors name the
	// upstream and the step that failed.
	exchange(ctx context.Context, query, buf []byte, id uint16, deadline time.Time) (int, error)

	// close fails the exchanges waiting with net.ErrClosed, and the
	// later ones, and returns once every goroutine of its own has ended.
	close()
}

// sockets returns what the next exchange goes through, starting the
// poller on the first exchange that needs it, and a new one on the first
// exchange after a poller's goroutine ended on its own (its epoll instance
// closed or broken under it: nothing of ours does that), which would
// otherwise fail every later exchange with net.ErrClosed until a restart.
// The exchanges waiting on the old poller when it ended failed with its
// error; restarts counts the replacements.
func (u *UDP) sockets() (udpSockets, error) {
	if u.portable {
		return u.dialer, nil
	}
	if p := u.poller.Load(); p != nil && !p.ended.Load() {
		return p, nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, fmt.Errorf("exchanging with %s: %w", u.label, net.ErrClosed)
	}
	old := u.poller.Load()
	if old != nil && !old.ended.Load() {
		return old, nil
	}
	if old != nil {
		old.close() // its goroutine has ended: this lets go of its sockets
		u.poller.Store(nil)
		u.restarts.Add(1)
	}
	p, err := newUDPPoller(u.peer, u.label, &u.dials)
	if err != nil {
		// A local error (the descriptor limit): the next exchange
		// tries again.
		return nil, fmt.Errorf("exchanging with %s: %w", u.label, err)
	}
	u.poller.Store(p)
	return p, nil
}

// answer decides what the datagram of n bytes in buf means.
func (u *UDP) answer(m *dns.Msg, query, buf []byte, id uint16, n int, raw bool) (Answer, error) {
	if n > cap(buf) && dnsmsg.Flags(buf[:cap(buf)])&dnsmsg.FlagQR != 0 {
		// Larger than anything we asked for (our query said
		// EDNSSize, and the buffer holds more): cut short, it would
		// only parse as malformed. A truncated answer, which TCP
		// carries whole. Forged, it costs a TCP exchange, no more.
		return Answer{Msg: &dns.Msg{MsgHdr: dns.MsgHdr{Id: m.Id, Response: true, Truncated: true}}}, nil
	}
	b := buf[:cap(buf)][:min(n, cap(buf))]
	if raw && !truncatedHeader(b) {
		if l, ok := dnsmsg.LayoutAnswer(query, b, id); ok {
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

// isICMPError reports whether err is how a socket reports an ICMP error
// that reached it: port or host unreachable, and the like.
func isICMPError(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTDOWN) ||
		errors.Is(err, syscall.EPROTO)
}

// quotes reports whether id is among the IDs an ICMP error quoted.
func quotes(ids []uint16, id uint16) bool {
	for _, q := range ids {
		if q == id {
			return true
		}
	}
	return false
}

// Close fails the exchanges waiting with net.ErrClosed, waits for the
// poller's goroutine to end, and closes the TCP fallback's idle
// connections. Exchanges after Close fail.
func (u *UDP) Close() error {
	u.mu.Lock()
	u.closed = true
	p := u.poller.Load()
	u.mu.Unlock()
	if p != nil {
		p.close()
	}
	u.dialer.close()
	return u.tcp.Close()
}

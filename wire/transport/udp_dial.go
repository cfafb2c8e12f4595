package transport

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// udpDialer gives each exchange a socket of its own from the net package,
// read on the exchange's goroutine under a read deadline: what every
// platform can do, at the price of a net.UDPConn's allocations per
// exchange (about a dozen) and a registration with the exchange's context.
// The UDP transport uses it where it has no poller.
type udpDialer struct {
	addr   string         // IP:PORT, or a name the dialer resolves
	label  string         // naming the upstream in errors
	dials  *atomic.Uint64 // the transport's count of sockets opened
	dialer net.Dialer

	mu     sync.Mutex            // guards following
	conns  map[net.Conn]struct{} // the sockets of the exchanges in flight, for close
	closed bool
}

var _ udpSockets = (*udpDialer)(nil)

func (d *udpDialer) exchange(ctx context.Context, query, buf []byte, id uint16, deadline time.Time) (int, error) {
	c, err := d.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer d.hangUp(c)
	stop := watch(ctx, c, deadline)
	defer stop()
	if _, err := c.Write(query); err != nil {
		return 0, ioError(ctx, "writing to", d.label, err)
	}
	uc, _ := c.(*net.UDPConn)
	rb := getBuf(maxMsgLen) // read whole, so that an answer too large for buf is known to be
	defer putBuf(rb)
	var quoted [8]uint16
	for {
		n, err := c.Read(rb)
		if err != nil {
			// An ICMP error the kernel matched to this socket's ports is
			// this query's when it quotes its ID, or when the platform
			// cannot say what it quotes (see quotedIDs).
			if isICMPError(err) && uc != nil && canQuoteICMP && !quotes(quotedIDs(uc, quoted[:0]), id) {
				continue
			}
			return 0, ioError(ctx, "reading from", d.label, err)
		}
		if n < 2 || binary.BigEndian.Uint16(rb) != id {
			continue // not this query's: dropped
		}
		copy(buf[:cap(buf)], rb[:n])
		return n, nil
	}
}

// dial opens an exchange's socket, which close will close.
func (d *udpDialer) dial(ctx context.Context) (net.Conn, error) {
	c, err := d.dialer.DialContext(ctx, "udp", d.addr)
	if err != nil {
		return nil, ioError(ctx, "dialing", d.label, err)
	}
	d.dials.Add(1)
	if uc, ok := c.(*net.UDPConn); ok {
		recvICMPErrors(uc)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		_ = c.Close()
		return nil, ioError(ctx, "dialing", d.label, net.ErrClosed)
	}
	if d.conns == nil {
		d.conns = make(map[net.Conn]struct{})
	}
	d.conns[c] = struct{}{}
	return c, nil
}

// hangUp closes an exchange's socket once the exchange has ended.
func (d *udpDialer) hangUp(c net.Conn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
	_ = c.Close()
}

// inFlight is the number of exchanges with a socket open, for tests.
func (d *udpDialer) inFlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

func (d *udpDialer) close() {
	d.mu.Lock()
	d.closed = true
	conns := d.conns
	d.conns = nil
	d.mu.Unlock()
	for c := range conns {
		_ = c.Close() // its exchange's read fails with net.ErrClosed
	}
}

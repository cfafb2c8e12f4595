package transport

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The poller recycles sockets, never ports: 50 exchanges one after
// another use one socket, connected afresh each time, on ports the kernel
// picks at random (a port twice in 50 would happen about once in 25 runs
// of 28,232 ports; three times, never).
func TestUDPPollerRecyclesSocketsNotPorts(t *testing.T) {
	t.Parallel()
	up := newEchoUpstream(t)
	u := newTestUDP(t, up.addr)
	for i := range 50 {
		mustAnswer(t, u, query(fmt.Sprintf("q%d.example", i)))
	}
	p := u.poller.Load()
	p.mu.Lock()
	open, idle := len(p.socks)-len(p.free), len(p.idle)
	p.mu.Unlock()
	if open != 1 || idle != 1 {
		t.Errorf("%d sockets open, %d idle after 50 exchanges in turn, want 1 and 1", open, idle)
	}
	seen := map[uint16]int{}
	for _, port := range up.stop() {
		seen[port]++
		if seen[port] > 2 {
			t.Errorf("port %d carried %d of 50 queries", port, seen[port])
		}
	}
	if len(seen) < 48 {
		t.Errorf("50 queries from %d ports, want about 50", len(seen))
	}
}

// disconnect leaves a socket bound to no port, with nothing queued: what
// came to its port after the exchange's answer (a duplicate, a late or a
// forged answer, an ICMP error) cannot reach the socket's next exchange.
func TestUDPPollerDisconnectEmptiesTheSocket(t *testing.T) {
	t.Parallel()
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	p, err := newUDPPoller(pc.LocalAddr().(*net.UDPAddr).AddrPort(), "udp://test", new(atomic.Uint64))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	s, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	defer p.put(s, false)
	if err := p.connect(s.fd); err != nil {
		t.Fatal(err)
	}
	port := localPort(t, s.fd)
	for range 3 { // queued: nobody waits on the socket
		if _, err := pc.WriteToUDPAddrPort([]byte("stale answer"), netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)); err != nil {
			t.Fatal(err)
		}
	}
	fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, -1); err != nil {
		t.Fatal(err)
	}

	if !p.disconnect(s.fd) {
		t.Fatal("disconnect: the socket cannot serve again")
	}
	if got := localPort(t, s.fd); got != 0 {
		t.Errorf("after disconnect the socket is bound to port %d, want none", got)
	}
	var b [512]byte
	if n, err := recvTrunc(s.fd, b[:]); err != unix.EAGAIN {
		t.Errorf("after disconnect a read returns %d bytes, %v: want nothing queued (EAGAIN)", n, err)
	}
}

// localPort is the port the socket fd is bound to; 0 for none.
func localPort(tb testing.TB, fd int) uint16 {
	tb.Helper()
	sa, err := unix.Getsockname(fd)
	if err != nil {
		tb.Fatal(err)
	}
	return uint16(sa.(*unix.SockaddrInet4).Port)
}

// The poller speaks IPv6 as IPv4: its own socket address for the
// upstream, connected per exchange.
func TestUDPPollerOverIPv6(t *testing.T) {
	t.Parallel()
	pc, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("prerequisite missing: IPv6 loopback: %v", err)
	}
	done := make(chan struct{})
	defer func() {
		_ = pc.Close()
		<-done
	}()
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			buf[2] |= 0x80
			_, _ = pc.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	u := newTestUDP(t, pc.LocalAddr().String())
	if u.portable {
		t.Fatalf("%s goes through the dialer, want the poller", pc.LocalAddr())
	}
	for i := range 3 {
		mustAnswer(t, u, query(fmt.Sprintf("v6-%d.example", i)))
	}
}

// A query's write interrupted by a signal is made again: the exchange is
// answered.
func TestUDPPollerWriteRetriesEINTR(t *testing.T) {
	t.Parallel()
	up := newEchoUpstream(t)
	u := newTestUDP(t, up.addr)
	mustAnswer(t, u, query("first.example")) // starts the poller
	p := u.poller.Load()
	var calls int
	p.write = func(fd int, b []byte) unix.Errno {
		calls++
		if calls <= 2 {
			return unix.EINTR
		}
		return rawWrite(fd, b)
	}
	mustAnswer(t, u, query("interrupted.example"))
	if calls != 3 {
		t.Errorf("%d writes, want 3: two interrupted, one made", calls)
	}
}

// A full send buffer (EAGAIN on the non-blocking socket) is this host's
// shortage, reported as ENOBUFS, which actors.Classify places as local:
// not evidence against the upstream.
func TestUDPPollerWriteEAGAINIsLocal(t *testing.T) {
	t.Parallel()
	up := newEchoUpstream(t)
	u := newTestUDP(t, up.addr)
	mustAnswer(t, u, query("first.example"))
	p := u.poller.Load()
	p.write = func(int, []byte) unix.Errno { return unix.EAGAIN }
	_, err := exchangeMsg(ctxWithin(t, answerTimeout), u, query("full.example"))
	if !errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("Exchange with a full send buffer: %v, want ENOBUFS (a local shortage)", err)
	}
	p.write = rawWrite
	mustAnswer(t, u, query("room.example")) // the socket serves again
}

// A poller whose goroutine ended on its own (its epoll instance closed
// under it) is replaced on the next exchange, which is answered; the old
// one's sockets are let go of.
func TestUDPPollerReplacedAfterItsGoroutineEnded(t *testing.T) {
	t.Parallel()
	up := newEchoUpstream(t)
	u := newTestUDP(t, up.addr)
	mustAnswer(t, u, query("first.example"))
	p := u.poller.Load()
	_ = p.file.Close() // run's wait fails: it ends, failing nothing (no exchange waits)
	p.reader.Wait()
	mustAnswer(t, u, query("after.example"))
	if u.poller.Load() == p || u.restarts.Load() != 1 {
		t.Errorf("poller replaced: %v, restarts %d; want a new poller, 1", u.poller.Load() != p, u.restarts.Load())
	}
	p.mu.Lock()
	open := len(p.socks) - countNil(p.socks)
	idle := len(p.idle)
	p.mu.Unlock()
	if open != 0 || idle != 0 {
		t.Errorf("the old poller keeps %d sockets, %d idle; want none", open, idle)
	}
	mustAnswer(t, u, query("again.example"))
}

func countNil(socks []*udpSock) (n int) {
	for _, s := range socks {
		if s == nil {
			n++
		}
	}
	return n
}

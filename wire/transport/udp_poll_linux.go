package transport

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// havePoller: on Linux the exchanges' sockets are waited for by a
// udpPoller.
const havePoller = true

// udpPoller gives each exchange of a UDP transport a source port of its
// own, and waits for all of them in one goroutine, run, through an epoll
// instance of the transport's. That instance is itself in Go's poller, as
// an os.File, so run sleeps without a thread and wakes at the file's read
// deadline: the earliest deadline of the exchanges waiting, or the next
// cancellation poll (see expire). An exchange thus allocates nothing and
// arms no timer of its own, as on the shared socket this replaced.
//
// The ports are fresh, the sockets are not: a socket is connected for one
// exchange, which binds it to a port the kernel picks at random, and
// disconnected after it, which releases the port and leaves the socket
// bound to nothing; its receive queue is then emptied, and it waits idle
// for another exchange. A socket opened and closed per exchange (with its
// registration in the epoll instance) cost three times as much: a
// forwarded query took 39 µs of CPU that way, 24 µs this way, 19 µs on
// the one shared socket of before (nxdnsbench, issue 16).
//
// Every system call on the exchanges' sockets is a RawSyscall: on a
// non-blocking socket none of them can block, and Syscall's bookkeeping
// (the goroutine's P marked as in a system call, which keeps sysmon at its
// shortest period retaking it) cost 0.7 µs of CPU per forwarded query
// (nxdnsbench, medians of three pairs: 23.2 → 22.4 µs). The listener's
// batches do the same (server_batch_linux.go).
//
// Who touches a socket: the exchange that has it takes it from the idle
// ones (or opens it), connects it, writes its query, and disconnects it
// once its wait has ended; in between only run reads it, and only while it
// holds the wait claimed, which nobody else ends.
type udpPoller struct {
	label  string         // naming the upstream in errors
	dials  *atomic.Uint64 // the transport's count of ports used
	family int            // AF_INET or AF_INET6: the upstream's
	sa4    unix.RawSockaddrInet4
	sa6    unix.RawSockaddrInet6             // the upstream, one of the two by family; never written after newUDPPoller
	epfd   int                               // the epoll instance; open while refs > 0
	file   *os.File                          // epfd, in Go's poller
	raw    syscall.RawConn                   // file's
	reader sync.WaitGroup                    // run
	write  func(fd int, b []byte) unix.Errno // rawWrite; a test's fake

	// Owned by run.
	events [udpEvents]unix.EpollEvent
	nev    int
	everr  error
	poll   func(fd uintptr) bool // reads events; made once, since a closure made per wake would be allocated

	mu       sync.Mutex // guards following, and the fields of every udpSock in socks
	socks    []*udpSock // every socket open, by the index its events carry; nil where free
	free     []int32    // the free indexes of socks
	idle     []*udpSock // the sockets no exchange has, disconnected
	live     int        // the sockets an exchange has
	refs     int        // holders of epfd: the transport until close, and each exchange
	armed    time.Time  // the read deadline set on file; zero: none
	closed   bool       // close was called, or run ended
	released bool       // close was called: the transport let go of epfd

	// ended is raised when run ended on its own, not by close: the
	// transport then replaces the poller on its next exchange (see
	// UDP.sockets). Read without mu by every exchange.
	ended atomic.Bool
}

// udpEvents is how many events run takes from epoll at once.
const udpEvents = 64

// udpIdleSockets is how many disconnected sockets a poller keeps for the
// next exchanges: more than the shipped 32 slots of an upstream, so that
// a busy upstream opens no socket; past it a socket is closed after its
// exchange.
const udpIdleSockets = 256

// udpSock is one socket of a poller, and the exchange that has it, if
// any. Its fields are guarded by the poller's mu, but buf, which run
// writes while it holds the socket claimed; done is set once per
// exchange, with ready signalled, and the exchange reads n and err after
// ready, which orders them after the writes.
type udpSock struct {
	fd  int
	idx int32 // in the poller's socks, and in the socket's epoll events

	busy     bool            // an exchange has the socket and waits for its answer
	id       uint16          // its query's wire ID
	buf      []byte          // its buffer; the datagram is read into buf[:cap(buf)], as much as fits
	n        int             // the datagram's whole length once delivered, which may exceed cap(buf)
	err      error           // delivered instead of a datagram
	done     bool            // n or err delivered
	claimed  bool            // run is reading fd outside the lock: nobody else delivers
	abort    error           // the exchange's own failure, delivered when run lets go of a claim
	ready    chan struct{}   // capacity 1: signalled on delivery
	ctx      context.Context // the exchange's, polled by run for cancellation (see expire)
	deadline time.Time       // when run ends the wait; zero for none
}

// newUDPPoller returns a poller of sockets connected to peer, and starts
// its goroutine; close stops it.
func newUDPPoller(peer netip.AddrPort, label string, dials *atomic.Uint64) (*udpPoller, error) {
	p := &udpPoller{label: label, dials: dials, write: rawWrite}
	if err := p.setPeer(peer); err != nil {
		return nil, err
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		_ = unix.Close(epfd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	// Non-blocking, the file goes into Go's poller; it is closed by
	// whoever lets go of it last (see put).
	p.epfd, p.file = epfd, os.NewFile(uintptr(epfd), "epoll")
	if err := p.file.SetReadDeadline(time.Time{}); err != nil {
		_ = p.file.Close()
		return nil, fmt.Errorf("polling with epoll: %w", err)
	}
	if p.raw, err = p.file.SyscallConn(); err != nil {
		_ = p.file.Close()
		return nil, err
	}
	p.poll = func(fd uintptr) bool {
		for {
			n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&p.events[0])), uintptr(len(p.events)), 0, 0, 0)
			p.nev, p.everr = int(n), nil
			if e != 0 {
				p.nev, p.everr = 0, e
			}
			if p.everr != unix.EINTR {
				return p.nev > 0 || p.everr != nil // false: sleep until epfd is readable
			}
		}
	}
	p.refs = 1
	p.reader.Add(1)
	go p.run()
	return p, nil
}

// setPeer fills the socket address that each socket is connected to.
func (p *udpPoller) setPeer(peer netip.AddrPort) error {
	ip := peer.Addr()
	port := (*[2]byte)(unsafe.Pointer(&p.sa4.Port))
	if ip.Is4() || ip.Is4In6() {
		p.family = unix.AF_INET
		p.sa4.Family = unix.AF_INET
		p.sa4.Addr = ip.Unmap().As4()
	} else {
		p.family = unix.AF_INET6
		p.sa6.Family = unix.AF_INET6
		p.sa6.Addr = ip.As16()
		port = (*[2]byte)(unsafe.Pointer(&p.sa6.Port))
		if zone := ip.Zone(); zone != "" {
			idx, err := strconv.ParseUint(zone, 10, 32)
			if err != nil {
				ifi, err := net.InterfaceByName(zone)
				if err != nil {
					return fmt.Errorf("dialing %s: %w", peer, err)
				}
				idx = uint64(ifi.Index)
			}
			p.sa6.Scope_id = uint32(idx)
		}
	}
	binary.BigEndian.PutUint16(port[:], peer.Port())
	return nil
}

var _ udpSockets = (*udpPoller)(nil)

func (p *udpPoller) exchange(ctx context.Context, query, buf []byte, id uint16, deadline time.Time) (int, error) {
	s, err := p.get()
	if err != nil {
		return 0, ioError(ctx, "dialing", p.label, err)
	}
	if err := p.connect(s.fd); err != nil {
		p.put(s, false)
		return 0, ioError(ctx, "dialing", p.label, err)
	}
	p.dials.Add(1)
	p.wait(s, id, buf, ctx, deadline)
	step := "reading from"
	if err := p.send(s.fd, query); err != nil {
		step = "writing to"
		p.fail(s, err)
	}
	<-s.ready
	n, err := s.n, s.err
	p.put(s, p.disconnect(s.fd))
	if err != nil {
		return 0, ioError(ctx, step, p.label, err)
	}
	return n, nil
}

// send writes query on the socket fd, connected to the upstream: again
// when a signal interrupted the call. A full send buffer (EAGAIN: a
// non-blocking datagram socket never waits for room) is this host's
// queue, not the upstream's doing: it is reported as ENOBUFS, the
// shortage of socket buffers that actors.Classify places as local.
func (p *udpPoller) send(fd int, query []byte) error {
	for {
		e := p.write(fd, query)
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			e = unix.ENOBUFS
		}
		return os.NewSyscallError("write", e)
	}
}

// rawWrite writes b on the socket fd with one bare write.
func rawWrite(fd int, b []byte) unix.Errno {
	_, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return e
}

// get returns a socket for an exchange, idle or new, bound to no port.
func (p *udpPoller) get() (*udpSock, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, net.ErrClosed
	}
	p.refs++
	p.live++
	if n := len(p.idle); n > 0 {
		s := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return s, nil
	}
	var idx int32
	if n := len(p.free); n > 0 {
		idx, p.free = p.free[n-1], p.free[:n-1]
	} else {
		idx = int32(len(p.socks))
		p.socks = append(p.socks, nil)
	}
	s := &udpSock{fd: -1, idx: idx, ready: make(chan struct{}, 1)}
	p.socks[idx] = s // not busy: run leaves it alone
	p.mu.Unlock()

	fd, err := p.socket(idx)
	if err != nil {
		p.put(s, false)
		return nil, err
	}
	s.fd = fd // before anyone else sees s again: ordered by p.mu in wait
	return s, nil
}

// socket opens a socket whose epoll events carry idx. The caller holds a
// reference to epfd (get).
func (p *udpPoller) socket(idx int32) (int, error) {
	fd, err := unix.Socket(p.family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	// The ICMP errors the socket earns are queued with the datagram they
	// quote (see drainQuoted).
	if p.family == unix.AF_INET {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVERR, 1)
	} else {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1)
	}
	// Edge-triggered: run reads the socket until it has no more, and each
	// datagram that comes later is a new edge.
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: idx}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		_ = unix.Close(fd)
		return -1, os.NewSyscallError("epoll_ctl", err)
	}
	return fd, nil
}

// connect connects the socket fd, bound to no port, to the upstream: the
// kernel binds it to a port picked at random from
// net.ipv4.ip_local_port_range. A bare system call: unix.Connect would
// allocate its Sockaddr.
func (p *udpPoller) connect(fd int) error {
	var e unix.Errno
	if p.family == unix.AF_INET {
		_, _, e = unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&p.sa4)), unix.SizeofSockaddrInet4)
	} else {
		_, _, e = unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&p.sa6)), unix.SizeofSockaddrInet6)
	}
	switch e {
	case 0:
		return nil
	case unix.EAGAIN:
		// No ephemeral port left to bind: the host's shortage, which
		// EADDRNOTAVAIL says (see actors.Classify).
		e = unix.EADDRNOTAVAIL
	}
	return os.NewSyscallError("connect", e)
}

// unspec is the address that disconnects a datagram socket.
var unspec = unix.RawSockaddr{Family: unix.AF_UNSPEC}

// disconnect releases the port of the socket fd, whose exchange has
// ended, and empties what it received since: the late answers and forged
// ones that came to that port, and the ICMP errors. Connected again it is
// on a new random port with nothing queued. It reports whether the socket
// can serve again.
func (p *udpPoller) disconnect(fd int) bool {
	// Connecting to AF_UNSPEC unbinds a socket that connect bound
	// (udp_disconnect): nothing reaches it until the next connect.
	if _, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&unspec)), unsafe.Sizeof(unspec.Family)); e != 0 {
		return false
	}
	var b [dnsmsg.HeaderLen]byte
	for {
		_, err := recvTrunc(fd, b[:])
		switch {
		case err == nil || err == unix.EINTR:
		case err == unix.EAGAIN:
			return true
		case isICMPError(err):
			drainQuoted(fd, nil)
		default:
			return false
		}
	}
}

// wait makes s's exchange wait for the answer carrying id, and has run
// wake by its deadline.
func (p *udpPoller) wait(s *udpSock, id uint16, buf []byte, ctx context.Context, deadline time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.busy, s.id, s.buf, s.ctx, s.deadline = true, id, buf, ctx, deadline
	if p.closed {
		p.deliverLocked(s, 0, net.ErrClosed)
		return
	}
	if wake, sooner := wakeFor(p.armed, deadline); sooner {
		p.arm(wake)
	}
}

// put takes s back from its exchange, whose wait has ended: idle when it
// can serve again (reusable) and the idle ones are not too many, closed
// otherwise. The last holder of the epoll instance closes it.
func (p *udpPoller) put(s *udpSock, reusable bool) {
	p.mu.Lock()
	s.busy, s.done, s.claimed = false, false, false
	s.n, s.err, s.abort, s.buf, s.ctx, s.deadline = 0, nil, nil, nil, nil, time.Time{}
	select {
	case <-s.ready:
	default:
	}
	p.live--
	keep := reusable && !p.closed && len(p.idle) < udpIdleSockets
	if keep {
		p.idle = append(p.idle, s)
	} else {
		p.socks[s.idx] = nil
		p.free = append(p.free, s.idx)
	}
	p.refs--
	last := p.refs == 0
	p.mu.Unlock()
	if !keep && s.fd >= 0 {
		_ = unix.Close(s.fd) // and out of the epoll instance
	}
	if last {
		_ = p.file.Close()
	}
}

// close fails the waits with net.ErrClosed, closes the idle sockets, wakes
// run and waits for it to end. The epoll instance is closed by the last
// exchange to let go of it.
//
// A poller whose run ended on its own (see end) is closed the same way:
// its idle sockets and the transport's hold on epfd are let go of here.
func (p *udpPoller) close() {
	p.mu.Lock()
	var idle []*udpSock
	last := false
	if !p.released {
		p.released = true
		if !p.closed {
			p.closed = true
			for _, s := range p.socks {
				if s != nil && s.busy && !s.claimed {
					p.deliverLocked(s, 0, net.ErrClosed)
				}
			}
			p.arm(aLongTimeAgo) // run wakes, sees closed, and ends
		}
		idle, p.idle = p.idle, nil
		for _, s := range idle {
			p.socks[s.idx] = nil
		}
		p.refs--
		last = p.refs == 0
	}
	p.mu.Unlock()
	for _, s := range idle {
		_ = unix.Close(s.fd)
	}
	p.reader.Wait()
	if last {
		_ = p.file.Close()
	}
}

// inFlight is the number of exchanges with a socket, for tests.
func (p *udpPoller) inFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

package server

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// On Linux a UDP reader takes the datagrams waiting on its socket several
// at a time, with one recvmmsg, and sends the answers it made itself (cache
// hits, local names, refusals) together, with one sendmmsg: under load a
// system call is shared by the queries that queued meanwhile, and with
// nothing queued it costs what recvfrom did. Queries for workers are handed
// on as each is read, before the batch's answers go out.

// mmsghdr is struct mmsghdr: a msghdr and the length the kernel read or
// wrote. Go pads it as C does, on 64-bit and 32-bit platforms alike.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// udpBatch is a reader's memory for one batch: the headers the kernel fills
// and the buffers they point to, allocated once per reader (and so never
// on a goroutine's stack, which may move).
type udpBatch struct {
	rc    syscall.RawConn // the socket's
	in    []mmsghdr
	iov   []unix.Iovec
	names []unix.RawSockaddrInet6 // room for either family's address
	bufs  []byte                  // len(in) × udpReadBufLen
	oob   []byte                  // len(in) × 2 pktinfoLen on a wildcard socket; else nil
	ans   []byte                  // len(in) × clientAnswerBufLen: the answers made on the reader

	out    []mmsghdr // the answers to send, pointing into names and the answers
	outIov []unix.Iovec
	outOOB []byte // len(in) × pktinfoLen, when oob is set
	nout   int

	// What the last system call did; recv and send are made once, since
	// closures made per batch would be allocated.
	n, sent int
	err     error
	recv    func(fd uintptr) bool
	send    func(fd uintptr) bool
}

var _ udpIn = (*udpBatch)(nil)

// newUDPIn is how a reader of pc reads: in batches of up to batch
// datagrams, or one at a time when batch is 1 or pc gives no raw access.
func newUDPIn(pc *net.UDPConn, batch int) udpIn {
	rc, err := pc.SyscallConn()
	if err != nil || batch <= 1 {
		return newUDPSingle(pc)
	}
	la, _ := pc.LocalAddr().(*net.UDPAddr)
	return newUDPBatch(rc, batch, la != nil && la.IP.IsUnspecified())
}

func newUDPBatch(rc syscall.RawConn, size int, wildcard bool) *udpBatch {
	b := &udpBatch{
		rc:     rc,
		in:     make([]mmsghdr, size),
		iov:    make([]unix.Iovec, size),
		names:  make([]unix.RawSockaddrInet6, size),
		bufs:   make([]byte, size*udpReadBufLen),
		ans:    make([]byte, size*clientAnswerBufLen),
		out:    make([]mmsghdr, size),
		outIov: make([]unix.Iovec, size),
	}
	if wildcard && pktinfoLen > 0 {
		b.oob = make([]byte, size*2*pktinfoLen)
		b.outOOB = make([]byte, size*pktinfoLen)
	}
	for i := range b.in {
		b.iov[i].Base = &b.bufs[i*udpReadBufLen]
		b.iov[i].SetLen(udpReadBufLen)
		h := &b.in[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Iov = &b.iov[i]
		h.SetIovlen(1)
	}
	b.recv = func(fd uintptr) bool {
		n, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.in[0])), uintptr(len(b.in)), 0, 0, 0)
		for e == unix.EINTR {
			n, _, e = unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.in[0])), uintptr(len(b.in)), 0, 0, 0)
		}
		if e == unix.EAGAIN {
			return false // wait for the socket to be readable again
		}
		b.n, b.err = int(n), nil
		if e != 0 {
			b.n, b.err = 0, e
		}
		return true
	}
	b.send = func(fd uintptr) bool {
		n, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.out[b.sent])), uintptr(b.nout-b.sent), 0, 0, 0)
		for e == unix.EINTR {
			n, _, e = unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.out[b.sent])), uintptr(b.nout-b.sent), 0, 0, 0)
		}
		if e == unix.EAGAIN {
			return false // wait for room in the send buffer
		}
		if e != 0 {
			b.n, b.err = 0, e
		} else {
			b.n, b.err = int(n), nil
		}
		return true
	}
	return b
}

// errReadNothing is a recvmmsg that returned 0 without an error.
var errReadNothing = errors.New("recvmmsg read nothing")

// read takes the datagrams queued on the socket, waiting for one. A
// recvmmsg that read nothing and said nothing (a non-blocking socket says
// EAGAIN instead) is an error, which the reader loop backs off from
// rather than spin on.
func (b *udpBatch) read() (int, error) {
	b.reset()
	if err := b.rc.Read(b.recv); err != nil {
		return 0, err
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.n <= 0 {
		return 0, errReadNothing
	}
	return b.n, nil
}

// reset makes every header ready for the next recvmmsg, which overwrites
// the lengths and flags it returns.
func (b *udpBatch) reset() {
	for i := range b.in {
		h := &b.in[i].hdr
		h.Namelen = unix.SizeofSockaddrInet6
		h.Flags = 0
		if b.oob != nil {
			h.Control = &b.oob[i*2*pktinfoLen]
			h.SetControllen(2 * pktinfoLen)
		}
		b.in[i].n = 0
	}
	b.nout, b.sent = 0, 0
}

// datagram returns the i-th datagram read (its first udpReadBufLen
// bytes), its sender, and on a wildcard socket the address it was sent to
// with its interface.
func (b *udpBatch) datagram(i int) (raw []byte, from netip.AddrPort, local netip.Addr, ifindex int32) {
	h := &b.in[i]
	n := min(int(h.n), udpReadBufLen)
	raw = b.bufs[i*udpReadBufLen : i*udpReadBufLen+n]
	from = sockaddrAddrPort(&b.names[i])
	if b.oob != nil {
		local, ifindex, _ = destination(b.oob[i*2*pktinfoLen : i*2*pktinfoLen+int(h.hdr.Controllen)])
	}
	return raw, from, local, ifindex
}

// answerBuf is the memory datagram i's answer may be built in.
func (b *udpBatch) answerBuf(i int) []byte {
	return b.ans[i*clientAnswerBufLen : i*clientAnswerBufLen : (i+1)*clientAnswerBufLen]
}

// queue adds answer to the batch's answers, to go back to datagram i's
// sender, from local when it is valid. answer must stay as it is until
// the batch is flushed.
func (b *udpBatch) queue(i int, answer []byte, local netip.Addr, ifindex int32) {
	j := b.nout
	b.nout++
	b.outIov[j].Base = &answer[0]
	b.outIov[j].SetLen(len(answer))
	h := &b.out[j].hdr
	*h = unix.Msghdr{Name: b.in[i].hdr.Name, Namelen: b.in[i].hdr.Namelen, Iov: &b.outIov[j]}
	h.SetIovlen(1)
	if local.IsValid() && b.outOOB != nil {
		c := sourceOOB(b.outOOB[j*pktinfoLen:(j+1)*pktinfoLen], local, ifindex)
		h.Control = &c[0]
		h.SetControllen(len(c))
	}
}

// sockaddrAddrPort returns the address and port in sa, which holds a
// sockaddr_in or a sockaddr_in6, IPv4 unmapped; a link-local IPv6 address
// keeps its zone, named as the net package names it.
func sockaddrAddrPort(sa *unix.RawSockaddrInet6) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port)
	case unix.AF_INET6:
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		ip := netip.AddrFrom16(sa.Addr)
		if sa.Scope_id != 0 && ip.Is6() && !ip.Is4In6() {
			ip = ip.WithZone(zoneName(sa.Scope_id))
		}
		return netip.AddrPortFrom(ip.Unmap(), port)
	}
	return netip.AddrPort{}
}

// zones caches interface names by index for link-local clients' zones.
var zones sync.Map // uint32 → string

// zoneName names the interface with index idx, or gives the index in
// decimal when no interface has it.
func zoneName(idx uint32) string {
	if z, ok := zones.Load(idx); ok {
		return z.(string)
	}
	name := strconv.FormatUint(uint64(idx), 10)
	if ifi, err := net.InterfaceByIndex(int(idx)); err == nil {
		name = ifi.Name
	}
	zones.Store(idx, name)
	return name
}

// errSentNothing is a sendmmsg that returned 0 without an error.
var errSentNothing = errors.New("sendmmsg sent nothing")

// flush sends the batch's answers, skipping any that fails, as writeUDP
// would have failed it, and logs the failures to log. A sendmmsg that
// sent nothing and said nothing (which the kernel does not do for a
// datagram socket, but flush must end whatever it is told) fails the
// first answer left, as an error would.
func (b *udpBatch) flush(log *zap.Logger) {
	for b.sent < b.nout {
		if err := b.rc.Write(b.send); err != nil {
			log.Debug("writing udp answers", zap.Error(err))
			return // the socket is closed, or Shutdown gave up on answers
		}
		if b.err == nil && b.n <= 0 {
			b.err = errSentNothing
		}
		if b.err != nil {
			log.Debug("writing udp answer", zap.Error(b.err))
			b.sent++
			continue
		}
		b.sent += b.n
	}
}

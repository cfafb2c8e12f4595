package server

import (
	"encoding/binary"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// udpSender is a UDP worker's memory for writing its answers with one bare
// sendmsg on the listening socket's descriptor: no lock of Go's on the
// descriptor (the workers of one socket would queue on it, which UDP does
// not need) and no scheduler bookkeeping around a system call that never
// blocks. Allocated once per worker, so that the kernel is never handed a
// pointer into a stack that may move.
type udpSender struct {
	hdr  unix.Msghdr
	iov  unix.Iovec
	name unix.RawSockaddrInet6 // room for either family's address
	oob  [64]byte
}

func newUDPSender() *udpSender { return new(udpSender) }

// rawFD returns pc's descriptor, for udpSender, or -1. The descriptor stays
// open while any worker can write to it: Shutdown closes the UDP sockets
// only after every worker has ended.
func rawFD(pc *net.UDPConn) int {
	rc, err := pc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	if err := rc.Control(func(d uintptr) { fd = int(d) }); err != nil {
		return -1
	}
	return fd
}

// send writes answer b to the client at to, from local on interface
// ifindex when local is valid, on the socket fd of family v6 or not. ok
// false means it could not (an address it does not write: a zone name),
// and the caller writes through the net package instead.
func (w *udpSender) send(fd int, v6 bool, b []byte, to netip.AddrPort, local netip.Addr, ifindex int32) (ok bool, err error) {
	if len(b) == 0 || to.Addr().Zone() != "" {
		return false, nil
	}
	w.hdr = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&w.name)), Iov: &w.iov}
	w.iov.Base = &b[0]
	w.iov.SetLen(len(b))
	w.hdr.SetIovlen(1)
	ip := to.Addr()
	if v6 {
		w.name = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ip.As16()}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&w.name.Port))[:], to.Port())
		w.hdr.Namelen = unix.SizeofSockaddrInet6
	} else {
		if !ip.Is4() && !ip.Is4In6() {
			return false, nil
		}
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&w.name))
		*sa = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ip.Unmap().As4()}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], to.Port())
		w.hdr.Namelen = unix.SizeofSockaddrInet4
	}
	if local.IsValid() {
		c := sourceOOB(w.oob[:], local, ifindex)
		w.hdr.Control = &c[0]
		w.hdr.SetControllen(len(c))
	}
	for {
		_, _, e := unix.RawSyscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&w.hdr)), 0)
		switch e {
		case 0:
			return true, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false, nil // the send buffer is full: the net package waits for room
		}
		return true, e
	}
}

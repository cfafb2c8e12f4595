package server

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// udpSender is a UDP worker's memory for writing its answers with one bare
// sendmsg on the listening socket's descriptor: no lock of Go's on the
// descriptor (the workers of one socket would queue on its write lock,
// which UDP does not need) and no scheduler bookkeeping around a system
// call that never blocks. Allocated once per worker, so that the kernel is
// never handed a pointer into a stack that may move.
//
// The descriptor is used only inside the socket's RawConn.Control, which
// holds a reference to it for the call: a socket closed meanwhile fails
// the send with net.ErrClosed, and its number, which the kernel may have
// given to another socket since, is never written to. (Shutdown closes
// the sockets only after every worker has ended, but nothing here relies
// on that order.) Control takes no lock, only the descriptor's reference
// count, and its function is bound once per worker: a closure made per
// answer would be allocated.
type udpSender struct {
	hdr  unix.Msghdr
	iov  unix.Iovec
	name unix.RawSockaddrInet6 // room for either family's address
	oob  [64]byte

	e   unix.Errno       // what the last sendmsg returned
	ctl func(fd uintptr) // sends hdr on fd into e; made once
}

func newUDPSender() *udpSender {
	w := new(udpSender)
	w.ctl = func(fd uintptr) {
		for {
			_, _, w.e = unix.RawSyscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&w.hdr)), 0)
			if w.e != unix.EINTR {
				return
			}
		}
	}
	return w
}

// rawConn returns pc's RawConn, for udpSender, or nil.
func rawConn(pc *net.UDPConn) syscall.RawConn {
	rc, err := pc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// send writes answer b to the client at to, from local on interface
// ifindex when local is valid, on the socket rc of family v6 or not. ok
// false means it could not (an address it does not write: a zone name; a
// full send buffer), and the caller writes through the net package
// instead, which waits for room.
func (w *udpSender) send(rc syscall.RawConn, v6 bool, b []byte, to netip.AddrPort, local netip.Addr, ifindex int32) (ok bool, err error) {
	if len(b) == 0 || to.Addr().Zone() != "" {
		return false, nil
	}
	// Field by field after a zeroing, not as literals: a literal is built
	// on the stack and copied from there in loads that wait for its
	// narrower stores.
	w.hdr = unix.Msghdr{}
	w.hdr.Name, w.hdr.Iov = (*byte)(unsafe.Pointer(&w.name)), &w.iov
	w.iov.Base = &b[0]
	w.iov.SetLen(len(b))
	w.hdr.SetIovlen(1)
	ip := to.Addr()
	if v6 {
		w.name = unix.RawSockaddrInet6{}
		w.name.Family, w.name.Addr = unix.AF_INET6, ip.As16()
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&w.name.Port))[:], to.Port())
		w.hdr.Namelen = unix.SizeofSockaddrInet6
	} else {
		if !ip.Is4() && !ip.Is4In6() {
			return false, nil
		}
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&w.name))
		*sa = unix.RawSockaddrInet4{}
		sa.Family, sa.Addr = unix.AF_INET, ip.Unmap().As4()
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], to.Port())
		w.hdr.Namelen = unix.SizeofSockaddrInet4
	}
	if local.IsValid() {
		c := sourceOOB(w.oob[:], local, ifindex)
		w.hdr.Control = &c[0]
		w.hdr.SetControllen(len(c))
	}
	if err := rc.Control(w.ctl); err != nil {
		return true, err // the socket is closed
	}
	switch w.e {
	case 0:
		return true, nil
	case unix.EAGAIN:
		return false, nil // the send buffer is full: the net package waits for room
	}
	return true, w.e
}

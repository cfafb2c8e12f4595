package server

import (
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pktinfoLen is room for one IP_PKTINFO or IPV6_PKTINFO control message,
// the larger of the two.
var pktinfoLen = unix.CmsgSpace(unix.SizeofInet6Pktinfo)

// recvDestination asks the kernel to tell, with each datagram c reads, the
// address it was sent to and the interface it came in on (IP_PKTINFO,
// IPV6_RECVPKTINFO): a socket bound to a wildcard address then answers
// from the address the client asked, not from the kernel's choice, which
// a client with several addresses on the path, privacy addresses or a
// virtual IP would drop.
func recvDestination(c *net.UDPConn, v6 bool) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		if v6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
		}
	}); err != nil {
		return err
	}
	return serr
}

// destination reads the datagram's destination address and interface
// from its control messages, without allocating.
func destination(oob []byte) (addr netip.Addr, ifindex int32, ok bool) {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		n := int(h.Len)
		if n < unix.SizeofCmsghdr || n > len(oob) {
			return netip.Addr{}, 0, false
		}
		data := oob[unix.CmsgLen(0):n]
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			p := (*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0]))
			return netip.AddrFrom4(p.Addr), p.Ifindex, true
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			p := (*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0]))
			return netip.AddrFrom16(p.Addr), int32(p.Ifindex), true
		}
		space := unix.CmsgSpace(n - unix.CmsgLen(0))
		if space > len(oob) {
			break
		}
		oob = oob[space:]
	}
	return netip.Addr{}, 0, false
}

// sourceOOB writes into b (at least pktinfoLen long) the control message
// that makes a datagram leave from src, on interface ifindex, and returns
// it.
func sourceOOB(b []byte, src netip.Addr, ifindex int32) []byte {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	if src.Is4() {
		n := unix.CmsgSpace(unix.SizeofInet4Pktinfo)
		clear(b[:n])
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
		h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
		p := (*unix.Inet4Pktinfo)(unsafe.Pointer(&b[unix.CmsgLen(0)]))
		p.Ifindex, p.Spec_dst = ifindex, src.As4()
		return b[:n]
	}
	n := unix.CmsgSpace(unix.SizeofInet6Pktinfo)
	clear(b[:n])
	h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet6Pktinfo))
	p := (*unix.Inet6Pktinfo)(unsafe.Pointer(&b[unix.CmsgLen(0)]))
	p.Addr, p.Ifindex = src.As16(), uint32(ifindex)
	return b[:n]
}

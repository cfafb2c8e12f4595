package transport

import (
	"encoding/binary"
	"net"

	"golang.org/x/sys/unix"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// canQuoteICMP: the kernel hands back the datagram an ICMP error quotes,
// so that the error fails only the query whose ID it quotes.
const canQuoteICMP = true

// recvICMPErrors asks the kernel to queue each ICMP error that reaches c
// with the datagram it quotes (IP_RECVERR, IPV6_RECVERR), so that
// quotedIDs can tell which query it concerns.
func recvICMPErrors(c *net.UDPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { recvICMPErrorsFD(int(fd)) })
}

// recvICMPErrorsFD is recvICMPErrors on a bare socket. Only the option of
// the socket's family takes; the other fails harmlessly.
func recvICMPErrorsFD(fd int) {
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVERR, 1)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1)
}

// quotedIDs drains c's error queue and appends to ids the wire ID of each
// query an ICMP error in it quotes. Only c's reader calls it: it reads the
// queue without blocking, under the socket's read lock.
func quotedIDs(c *net.UDPConn, ids []uint16) []uint16 {
	rc, err := c.SyscallConn()
	if err != nil {
		return ids
	}
	_ = rc.Read(func(fd uintptr) bool {
		ids = drainQuoted(int(fd), ids)
		return true
	})
	return ids
}

// drainQuoted drains the error queue of the socket fd and appends to ids
// the wire ID of each query an ICMP error in it quotes: the first two
// bytes of the UDP payload the kernel hands back. An ICMP error that
// quotes less (a router may quote only the UDP header) names no query.
func drainQuoted(fd int, ids []uint16) []uint16 {
	var buf [dnsmsg.HeaderLen]byte
	var oob [256]byte // the sock_extended_err and the offender's address
	for {
		n, _, _, _, err := unix.Recvmsg(fd, buf[:], oob[:], unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		if err != nil {
			return ids // EAGAIN: the queue is empty
		}
		if n >= 2 {
			ids = append(ids, binary.BigEndian.Uint16(buf[:]))
		}
	}
}

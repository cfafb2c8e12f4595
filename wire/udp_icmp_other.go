//go:build !linux

package wire

import "net"

// recvICMPErrors does nothing where the kernel cannot say which datagram
// an ICMP error quotes.
func recvICMPErrors(*net.UDPConn) {}

// quotedIDs names no query where the kernel cannot say which datagram an
// ICMP error quotes: the error then fails no exchange.
func quotedIDs(_ *net.UDPConn, ids []uint16) []uint16 { return ids }

//go:build !linux

package transport

import "net"

// canQuoteICMP: the kernel cannot say which datagram an ICMP error quotes.
// An ICMP error the kernel matched to a query's own socket (its random
// port) is then that query's.
const canQuoteICMP = false

// recvICMPErrors does nothing where the kernel cannot say which datagram
// an ICMP error quotes.
func recvICMPErrors(*net.UDPConn) {}

// quotedIDs names no query where the kernel cannot say which datagram an
// ICMP error quotes.
func quotedIDs(_ *net.UDPConn, ids []uint16) []uint16 { return ids }

//go:build !linux

package server

import (
	"net"
	"net/netip"
)

// newUDPIn reads one datagram at a time: batched system calls are Linux's.
func newUDPIn(pc *net.UDPConn, _ int) udpIn { return newUDPSingle(pc) }

// udpSender is nothing here: workers write through the net package.
type udpSender struct{}

func newUDPSender() *udpSender { return nil }

// rawFD is -1: no bare system calls here.
func rawFD(*net.UDPConn) int { return -1 }

func (*udpSender) send(int, bool, []byte, netip.AddrPort, netip.Addr, int32) (bool, error) {
	return false, nil
}

//go:build !linux

package server

import (
	"net"
	"net/netip"
)

// readUDPBatches is readUDP: batched system calls are Linux's.
func (s *Server) readUDPBatches(pc *net.UDPConn, _ int) { s.readUDP(pc) }

// udpSender is nothing here: workers write through the net package.
type udpSender struct{}

func newUDPSender() *udpSender { return nil }

// rawFD is -1: no bare system calls here.
func rawFD(*net.UDPConn) int { return -1 }

func (*udpSender) send(int, bool, []byte, netip.AddrPort, netip.Addr, int32) (bool, error) {
	return false, nil
}

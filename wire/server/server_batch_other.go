//go:build !linux

package server

import (
	"net"
	"net/netip"
	"syscall"
)

// newUDPIn reads one datagram at a time: batched system calls are Linux's.
func newUDPIn(pc *net.UDPConn, _ int) udpIn { return newUDPSingle(pc) }

// udpSender is nothing here: workers write through the net package.
type udpSender struct{}

func newUDPSender() *udpSender { return nil }

// rawConn is nil: no bare system calls here.
func rawConn(*net.UDPConn) syscall.RawConn { return nil }

func (*udpSender) send(syscall.RawConn, bool, []byte, netip.AddrPort, netip.Addr, int32) (bool, error) {
	return false, nil
}

//go:build !linux

package server

import (
	"errors"
	"net"
	"net/netip"
)

// pktinfoLen is 0: elsewhere a wildcard socket answers from the kernel's
// choice of address.
var pktinfoLen = 0

func recvDestination(*net.UDPConn, bool) error {
	return errors.New("replies from the address asked need IP_PKTINFO (Linux)")
}

func destination([]byte) (netip.Addr, int32, bool) { return netip.Addr{}, 0, false }

func sourceOOB(b []byte, _ netip.Addr, _ int32) []byte { return b[:0] }

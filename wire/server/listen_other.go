//go:build !unix

package server

import (
	"net"
	"net/netip"
)

// ListenUDP binds one UDP socket to ap: SO_REUSEPORT is a Unix option.
func ListenUDP(ap netip.AddrPort, _ int) ([]*net.UDPConn, error) {
	pc, err := net.ListenUDP(udpNetwork(ap), net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return nil, err
	}
	return []*net.UDPConn{pc}, nil
}

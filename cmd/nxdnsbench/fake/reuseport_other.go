//go:build !unix

package fake

import (
	"fmt"
	"net"
	"net/netip"
)

// listenUDP binds one UDP socket to ap where SO_REUSEPORT is not available;
// n readers would contend for it, so one is all it gets.
func listenUDP(ap netip.AddrPort, _ int) ([]*net.UDPConn, error) {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return nil, fmt.Errorf("fake: listening on udp %s: %w", ap, err)
	}
	return []*net.UDPConn{c}, nil
}

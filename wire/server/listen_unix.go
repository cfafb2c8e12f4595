//go:build unix

package server

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// ListenUDP binds n UDP sockets to ap, with SO_REUSEPORT when n > 1 so
// that the kernel spreads clients over them by their address (one reader
// each). The first chooses the port when ap's is 0; the others join it.
func ListenUDP(ap netip.AddrPort, n int) ([]*net.UDPConn, error) {
	if n <= 1 {
		pc, err := net.ListenUDP(udpNetwork(ap), net.UDPAddrFromAddrPort(ap))
		if err != nil {
			return nil, err
		}
		return []*net.UDPConn{pc}, nil
	}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	var out []*net.UDPConn
	for range n {
		pc, err := lc.ListenPacket(context.Background(), udpNetwork(ap), net.UDPAddrFromAddrPort(ap).String())
		if err != nil {
			for _, c := range out {
				_ = c.Close()
			}
			return nil, fmt.Errorf("with SO_REUSEPORT: %w", err)
		}
		c := pc.(*net.UDPConn)
		out = append(out, c)
		ap = c.LocalAddr().(*net.UDPAddr).AddrPort()
	}
	return out, nil
}

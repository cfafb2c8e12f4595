//go:build unix

package fake

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenUDP binds n UDP sockets to ap with SO_REUSEPORT, the first one
// choosing the port when ap's is 0, so that the kernel spreads clients
// over them by their address.
func listenUDP(ap netip.AddrPort, n int) ([]*net.UDPConn, error) {
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
		pc, err := lc.ListenPacket(context.Background(), "udp", ap.String())
		if err != nil {
			for _, c := range out {
				_ = c.Close()
			}
			return nil, fmt.Errorf("fake: listening on udp %s: %w", ap, err)
		}
		c := pc.(*net.UDPConn)
		out = append(out, c)
		ap = c.LocalAddr().(*net.UDPAddr).AddrPort() // the others join its port
	}
	return out, nil
}

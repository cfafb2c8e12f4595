package config

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// selfUpstreams refuses an enabled udp:// or tcp:// upstream that is one
// of nxdnsd's own listeners (server.listen): every query sent there would
// come back to nxdnsd, be forwarded there again, and so on without end.
// A wildcard listener (0.0.0.0, [::]) takes every address of this host of
// its family on its port: 127.0.0.0/8 or ::1, the host's interface
// addresses (local lists them), and the unspecified address itself, which
// a connect turns into loopback. A listener on port 0 gets a port nobody
// can name in advance and is never matched. It reads the upstreams' Addr,
// so it runs after upstreams.
//
// A loop through another forwarder (nxdnsd forwarding to a router that
// forwards back) is beyond any check of the file: the loop checks of the
// upstream actors find it at run time (docs/operations.md, "Forwarding
// loops").
func (ck *checker) selfUpstreams(us []Upstream, listen []string, local func() []netip.Addr) {
	for i, u := range us {
		if !u.IsEnabled() || u.Addr.Scheme() != "udp" && u.Addr.Scheme() != "tcp" {
			continue
		}
		ip, err := netip.ParseAddr(u.Addr.Host())
		if err != nil {
			continue
		}
		for j, l := range listen {
			ap, err := netip.ParseAddrPort(l)
			if err != nil || ap.Port() == 0 || ap.Port() != u.Addr.Port() || !reaches(ip, ap.Addr(), local) {
				continue
			}
			ck.add(fmt.Sprintf("upstreams[%d].address", i),
				"%q is nxdnsd's own listener server.listen[%d] (%q): every query sent there would come back to nxdnsd; name the resolver nxdnsd forwards to", u.Address, j, l)
			break
		}
	}
}

// reaches reports whether a datagram or connection sent to ip arrives at
// a listener bound to l on the same port.
func reaches(ip, l netip.Addr, local func() []netip.Addr) bool {
	ip, l = ip.WithZone("").Unmap(), l.WithZone("").Unmap()
	if ip.Is4() != l.Is4() {
		return false
	}
	if ip.IsUnspecified() { // connect(2) sends to the unspecified address over loopback
		ip = netip.IPv6Loopback()
		if l.Is4() {
			ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
	}
	switch {
	case ip == l:
		return true
	case !l.IsUnspecified():
		return false
	}
	return ip.IsLoopback() || slices.Contains(local(), ip)
}

// hostAddrs returns the addresses of this host's interfaces, read when a
// wildcard listener shares its port with an upstream that is not
// loopback; none when they cannot be read (loopback is matched anyway).
func hostAddrs() []netip.Addr {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().WithZone("").Unmap())
		}
	}
	return out
}

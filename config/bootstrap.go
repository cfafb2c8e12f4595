package config

import (
	"fmt"
	"net/netip"
)

// bootstrap checks upstream.bootstrap and sets p.BootstrapAddrs. Each
// entry is IP:PORT (an IP alone is port 53, as for a forward zone's
// resolver), and none may be nxdnsd's own listener: the lookup would ask
// nxdnsd for the address of the upstream it needs to answer.
func (ck *checker) bootstrap(p *UpstreamPolicy, listen []string, local func() []netip.Addr) {
	p.BootstrapAddrs = nil
	if len(p.Bootstrap) == 0 {
		p.Bootstrap = nil // "bootstrap = []" and no key are one configuration
	}
	for i, s := range p.Bootstrap {
		path := fmt.Sprintf("upstream.bootstrap[%d]", i)
		ap, err := parseResolver(s)
		if err != nil {
			ck.add(path, "%v", err)
			continue
		}
		if j := ownListener(ap, listen, local); j >= 0 {
			ck.add(path, "%q is nxdnsd's own listener server.listen[%d] (%q): the lookup would ask nxdnsd itself", s, j, listen[j])
			continue
		}
		p.BootstrapAddrs = append(p.BootstrapAddrs, ap)
	}
}

// bootstrapWarnings is Warnings' part for the upstreams' host names: a
// tls or https upstream without ip whose host nothing can look up —
// upstream.bootstrap is empty and no other enabled upstream needs no
// lookup itself (udp, tcp, an ip, or an IP as host). nxdnsd
// never asks the system resolver, so every attempt at it is a local error
// (nothing recorded against it) and the pool fails over past it.
func (c *Config) bootstrapWarnings() Problems {
	if len(c.Upstream.Bootstrap) > 0 {
		return nil
	}
	for _, u := range c.Upstreams {
		if u.IsEnabled() && u.Addr.Scheme() != "" && !u.NeedsBootstrap() {
			return nil // it can look the others up
		}
	}
	var ws Problems
	for i, u := range c.Upstreams {
		if u.IsEnabled() && u.NeedsBootstrap() {
			ws = append(ws, Problem{Path: fmt.Sprintf("upstreams[%d].ip", i), Message: oneLine(fmt.Sprintf(
				"warning: %q names a host that nothing can look up, so it is never used: set ip, list upstream.bootstrap resolvers, or add an upstream with an ip (nxdnsd never asks the system resolver)",
				u.Address))})
		}
	}
	return ws
}

// NeedsBootstrap reports whether u's host is looked up through the
// bootstrap (upstream.bootstrap, or the upstreams with an ip) before it
// can be dialled: a tls or https upstream whose host is a name, without
// ip. It reads the fields validation parsed.
func (u Upstream) NeedsBootstrap() bool {
	if !u.Addr.IsTLS() || u.IP != "" {
		return false
	}
	_, err := netip.ParseAddr(u.Addr.Host())
	return err != nil
}

// ownListener returns the index of the listen address that a query sent
// to ap would reach, or -1.
func ownListener(ap netip.AddrPort, listen []string, local func() []netip.Addr) int {
	for j, l := range listen {
		lp, err := netip.ParseAddrPort(l)
		if err == nil && lp.Port() != 0 && lp.Port() == ap.Port() && reaches(ap.Addr(), lp.Addr(), local) {
			return j
		}
	}
	return -1
}

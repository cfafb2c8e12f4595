package config

import (
	"fmt"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/rebind"
)

// rebind checks server.rebind_allow and sets RebindAllowNames.
func (ck *checker) rebind(s *Server) {
	s.RebindAllowNames = nil
	if len(s.RebindAllow) == 0 {
		s.RebindAllow = nil // "rebind_allow = []" and no key are one configuration
	}
	seen := make(firsts[string], len(s.RebindAllow))
	for i, n := range s.RebindAllow {
		p := fmt.Sprintf("server.rebind_allow[%d]", i)
		if msg := domainProblem(n); msg != "" {
			ck.add(p, "%s", msg)
			continue
		}
		c := dns.CanonicalName(n)
		if j, dup := seen.add(c, i); dup {
			ck.add(p, "duplicate name %q (also server.rebind_allow[%d])", c, j)
			continue
		}
		s.RebindAllowNames = append(s.RebindAllowNames, c)
	}
}

// IPAddr is the address the upstream is dialled at, when the file says
// it: a udp:// or tcp:// IP, the ip key, or a tls:// or https:// host
// written as an IP. ok is false for a host name looked up at run time.
func (u Upstream) IPAddr() (addr netip.Addr, ok bool) {
	if u.DialIP.IsValid() {
		return u.DialIP, true
	}
	ip, err := netip.ParseAddr(u.Addr.Host())
	return ip.WithZone(""), err == nil
}

// rebindWarnings names each enabled pool upstream with a private address
// while rebinding protection is on (spec section 15): the names of the
// home network it answers for lose their private addresses, unless they
// are single-label or under lan., home.arpa., local. or internal.; they
// belong in a forward zone.
func (c *Config) rebindWarnings() Problems {
	if !c.Server.RebindProtection {
		return nil
	}
	var ws Problems
	for i, u := range c.Upstreams {
		ip, ok := u.IPAddr()
		if !u.IsEnabled() || !ok || !rebind.Private(ip) || ip.IsLoopback() {
			continue
		}
		ws = append(ws, Problem{Path: fmt.Sprintf("upstreams[%d].address", i), Message: oneLine(warningPrefix + fmt.Sprintf(
			"%s has a private address: rebinding protection strips private addresses from its answers for public names; "+
				"answer the home network's own names through a [[forward_zones]] entry for its domain, or list them in server.rebind_allow", ip))})
	}
	return ws
}

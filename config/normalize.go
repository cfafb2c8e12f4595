package config

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// DefaultResolverPort is the port of a forward_zones[i].resolver written
// without one: plain DNS.
const DefaultResolverPort = 53

// normalize rewrites the values that have several spellings into the one
// the rest of nxdnsd compares against (see Parse). It runs only after
// check found nothing wrong, so every value parses and every parsed field
// is set.
func (c *Config) normalize() {
	for i := range c.ForwardZones {
		z := &c.ForwardZones[i]
		z.Zone = dns.CanonicalName(z.Zone)
		if ap, err := parseResolver(z.Resolver); err == nil {
			z.Resolver = ap.String()
		}
	}
	for i := range c.LocalRecords {
		// Spelled as the record check built: nothing is parsed again.
		r := &c.LocalRecords[i]
		r.Name = r.RR.Header().Name
		r.Type = dns.TypeToString[r.RR.Header().Rrtype]
		r.Value = recordText(r.RR)
	}
	c.Log.Level = strings.ToLower(c.Log.Level)
}

// domainProblem says what is wrong with s as a domain name in a zone or a
// record, or returns "". Both "lan" and "lan." are accepted. Beyond
// dns.IsDomainName, which takes any byte, it refuses spaces, control
// characters and non-ASCII: in a configuration file those are typos or
// unconverted internationalised names (write the xn-- form).
func domainProblem(s string) string {
	if s == "" {
		return "is required"
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return fmt.Sprintf("%q is not a valid domain name (spaces, control characters and non-ASCII are not allowed)", s)
		}
	}
	if _, ok := dns.IsDomainName(s); !ok {
		return fmt.Sprintf("%q is not a valid domain name", s)
	}
	return ""
}

// parseResolver parses a forward-zone resolver: IP:PORT, or an IP alone
// for port 53. IPv6 must be in brackets either way ("[fd00::1]" or
// "[fd00::1]:53"), because without them "fd00::1:53" would silently be a
// different address on port 53.
func parseResolver(s string) (netip.AddrPort, error) {
	bad := func(why string) (netip.AddrPort, error) {
		return netip.AddrPort{}, fmt.Errorf("%q is not IP or IP:PORT%s", s, why)
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return bad(": port must be in 1..65535")
		}
		return ap, nil
	}
	host := s
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return bad(" (IPv6 in brackets)")
	case ip.Is6() && host == s:
		return bad(": write IPv6 in brackets, e.g. [fd00::1]:53")
	case ip.Is4() && host != s:
		return bad(": brackets are for IPv6 only")
	}
	return netip.AddrPortFrom(ip, DefaultResolverPort), nil
}

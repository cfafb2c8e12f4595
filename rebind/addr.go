package rebind

import "net/netip"

// Private reports whether a is an address that rebinding protection
// strips from a public name's answer (spec section 15): RFC 1918
// (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16), loopback (127.0.0.0/8,
// ::1), link-local (169.254.0.0/16, fe80::/10), 0.0.0.0/8 and the IPv6
// unspecified address ::, CGNAT (100.64.0.0/10) and ULA (fc00::/7). An
// IPv4-mapped IPv6 address (::ffff:192.168.1.1) is judged as the IPv4
// address it carries, and a zone is ignored.
func Private(a netip.Addr) bool {
	if a.Is4In6() {
		a = a.Unmap()
	}
	if a.Is4() {
		b := a.As4()
		return private4(b[:])
	}
	if a.Is6() {
		b := a.As16()
		return private6(b[:])
	}
	return false
}

// private4 is Private for the four bytes of an IPv4 address, as an A
// record's RDATA holds them.
func private4(b []byte) bool {
	switch b[0] {
	case 0, 10, 127: // this network (0.0.0.0/8), RFC 1918, loopback
		return true
	case 100: // CGNAT, RFC 6598: 100.64.0.0/10
		return b[1]&0xC0 == 64
	case 169: // link-local
		return b[1] == 254
	case 172: // RFC 1918: 172.16.0.0/12
		return b[1]&0xF0 == 16
	case 192: // RFC 1918
		return b[1] == 168
	}
	return false
}

// private6 is Private for the sixteen bytes of an IPv6 address, as an
// AAAA record's RDATA holds them.
func private6(b []byte) bool {
	switch {
	case b[0]&0xFE == 0xFC: // ULA, fc00::/7
		return true
	case b[0] == 0xFE && b[1]&0xC0 == 0x80: // link-local, fe80::/10
		return true
	}
	// What is left starts with ten zero bytes: ::, ::1 and the
	// IPv4-mapped ::ffff:a.b.c.d.
	for _, c := range b[:10] {
		if c != 0 {
			return false
		}
	}
	switch {
	case b[10] == 0xFF && b[11] == 0xFF:
		return private4(b[12:])
	case b[10] == 0 && b[11] == 0 && b[12] == 0 && b[13] == 0 && b[14] == 0:
		return b[15] <= 1 // :: (unspecified) and ::1 (loopback)
	}
	return false
}

// RouterAddress reports whether a, a pool upstream's address, is one a
// home router answers on: RFC 1918 or ULA (spec section 15). Private
// reverse names go to such an upstream rather than being answered
// NXDOMAIN, because the router knows its own leases' names.
func RouterAddress(a netip.Addr) bool {
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		return b[0] == 10 || b[0] == 172 && b[1]&0xF0 == 16 || b[0] == 192 && b[1] == 168
	}
	b := a.As16()
	return a.Is6() && b[0]&0xFE == 0xFC
}

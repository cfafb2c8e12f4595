package clients

import (
	"bytes"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// A binding is one name for one address, read from a file.
type binding struct {
	addr    netip.Addr
	name    string
	expires time.Time // a lease's end; zero: never
}

// parsed is what one read of a file gave.
type parsed struct {
	bindings []binding
	bad      int // lines skipped as malformed
	firstBad int // the line number of the first of them, 1-based; 0 none
}

func (p *parsed) badLine(n int) {
	p.bad++
	if p.firstBad == 0 {
		p.firstBad = n
	}
}

// lines calls f with each line of data and its number, 1-based, without
// its line end and with what follows a '#' removed.
func lines(data []byte, f func(n int, line []byte)) {
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f(n, bytes.TrimSpace(line))
	}
}

// parseHosts reads a file in /etc/hosts format: ADDRESS NAME [ALIAS…],
// '#' comments. A line whose address or a name does not parse is skipped
// and counted.
func parseHosts(data []byte) parsed {
	var p parsed
	lines(data, func(n int, line []byte) {
		fields := strings.Fields(string(line))
		if len(fields) == 0 {
			return
		}
		addr, err := netip.ParseAddr(fields[0])
		if err != nil || len(fields) < 2 {
			p.badLine(n)
			return
		}
		for _, name := range fields[1:] {
			if !validName(name) {
				p.badLine(n)
				return
			}
		}
		for _, name := range fields[1:] {
			p.bindings = append(p.bindings, binding{addr: canonicalAddr(addr), name: strings.TrimSuffix(name, ".")})
		}
	})
	return p
}

// parseLeases reads a DHCP lease file: dnsmasq's format, or ISC dhcpd's
// (see parseISCLeases), told apart by their first record.
func parseLeases(data []byte) parsed {
	if isISC(data) {
		return parseISCLeases(data)
	}
	return parseDnsmasqLeases(data)
}

// parseDnsmasqLeases reads dnsmasq's lease file (its dhcp-leasefile,
// /var/lib/misc/dnsmasq.leases; OpenWrt's /tmp/dhcp.leases): one lease a
// line, EXPIRY MAC ADDRESS NAME CLIENT-ID, EXPIRY in seconds since the
// epoch or 0 for an infinite lease, NAME "*" when the client gave none.
// DHCPv6 leases have the IAID where the MAC is, and follow a line "duid
// SERVER-DUID", which is no lease.
func parseDnsmasqLeases(data []byte) parsed {
	var p parsed
	lines(data, func(n int, line []byte) {
		fields := strings.Fields(string(line))
		switch {
		case len(fields) == 0:
			return
		case fields[0] == "duid" && len(fields) == 2:
			return
		case len(fields) < 4:
			p.badLine(n)
			return
		}
		exp, err := strconv.ParseInt(fields[0], 10, 64)
		addr, aerr := netip.ParseAddr(fields[2])
		name := fields[3]
		if err != nil || exp < 0 || exp > maxLeaseEnd || aerr != nil || name != "*" && !validName(name) {
			p.badLine(n)
			return
		}
		if name == "*" {
			return
		}
		b := binding{addr: canonicalAddr(addr), name: strings.TrimSuffix(name, ".")}
		if exp > 0 {
			b.expires = time.Unix(exp, 0)
		}
		p.bindings = append(p.bindings, b)
	})
	return p
}

// maxLeaseEnd is the latest end of a lease, in seconds since the epoch:
// the end of year 9999. A later one is malformed: past about 2^63 - 2^35
// seconds time.Unix wraps round to a date long past, which made a lease
// ending in 292 billion years one that had ended.
const maxLeaseEnd = 253402300799

// validName reports whether s is a host name as lease and hosts files
// hold them: labels of letters, digits, '-' and '_', 1 to 63 bytes each,
// 253 bytes in all, a trailing dot allowed.
func validName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// canonicalAddr is a as clients are looked up: IPv4-mapped addresses as
// IPv4, without a zone.
func canonicalAddr(a netip.Addr) netip.Addr {
	// Is4 and Is4In6 inline; WithZone does not, and its call costs Name
	// more than its map lookup: it is made only for a zone.
	switch {
	case a.Is4():
		return a
	case a.Is4In6():
		return a.Unmap()
	case a.Zone() != "":
		return a.WithZone("")
	}
	return a
}

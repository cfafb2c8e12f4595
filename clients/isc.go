package clients

import (
	"bytes"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// isISC reports whether data, a lease file, is ISC dhcpd's
// (dhcpd.leases(5)): its first record opens with "lease ADDRESS {".
func isISC(data []byte) bool {
	found := false
	done := false
	lines(data, func(_ int, line []byte) {
		if done || len(line) == 0 {
			return
		}
		done = true
		found = bytes.HasPrefix(line, []byte("lease ")) || bytes.HasPrefix(line, []byte("authoring-byte-order")) ||
			bytes.HasPrefix(line, []byte("server-duid"))
	})
	return found
}

// parseISCLeases reads ISC dhcpd's lease file, dhcpd.leases(5): records
// "lease ADDRESS { STATEMENT; … }", of which it takes "ends" (UTC, "ends
// never;" or "ends epoch N;" too), "client-hostname" and "binding state".
// A later record of an address replaces an earlier one, as dhcpd appends
// them. A lease whose binding state is not active is no name. A record
// that does not parse is skipped and counted, at the line it began.
func parseISCLeases(data []byte) parsed {
	var p parsed
	type lease struct {
		b      binding
		active bool
		line   int
		ok     bool
	}
	var (
		cur    *lease
		order  []netip.Addr
		latest = map[netip.Addr]lease{}
	)
	lines(data, func(n int, line []byte) {
		s := string(line)
		switch {
		case s == "":
			return
		case cur == nil && strings.HasPrefix(s, "lease ") && strings.HasSuffix(s, "{"):
			a, err := netip.ParseAddr(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "lease "), "{")))
			cur = &lease{line: n, ok: err == nil, active: true}
			cur.b.addr = canonicalAddr(a)
		case cur == nil:
			// Other top-level statements (authoring-byte-order,
			// server-duid, host, failover) name no lease.
		case s == "}":
			if !cur.ok {
				p.badLine(cur.line)
			} else {
				if _, seen := latest[cur.b.addr]; !seen {
					order = append(order, cur.b.addr)
				}
				latest[cur.b.addr] = *cur
			}
			cur = nil
		case strings.HasPrefix(s, "ends "):
			t, ok := iscTime(strings.TrimSuffix(strings.TrimPrefix(s, "ends "), ";"))
			cur.b.expires, cur.ok = t, cur.ok && ok
		case strings.HasPrefix(s, "client-hostname "):
			name := strings.TrimSuffix(strings.TrimPrefix(s, "client-hostname "), ";")
			name = strings.TrimSuffix(strings.TrimPrefix(name, `"`), `"`)
			if validName(name) {
				cur.b.name = strings.TrimSuffix(name, ".")
			} else {
				cur.ok = false
			}
		case strings.HasPrefix(s, "binding state "):
			cur.active = strings.TrimSuffix(strings.TrimPrefix(s, "binding state "), ";") == "active"
		}
	})
	if cur != nil { // cut off in the middle of a record
		p.badLine(cur.line)
	}
	for _, a := range order {
		if l := latest[a]; l.active && l.b.name != "" {
			p.bindings = append(p.bindings, l.b)
		}
	}
	return p
}

// iscTime parses a dhcpd.leases(5) date: "W YYYY/MM/DD HH:MM:SS" in UTC
// (one before 1970 as the epoch), "epoch N" (N at most maxLeaseEnd), or
// "never" (the zero time: no end).
var unixEpoch = time.Unix(0, 0).UTC()

func iscTime(s string) (time.Time, bool) {
	switch f := strings.Fields(s); {
	case len(f) == 1 && f[0] == "never":
		return time.Time{}, true
	case len(f) == 3 && f[0] != "epoch":
		t, err := time.Parse("2006/01/02 15:04:05", f[1]+" "+f[2])
		if err == nil && t.Before(unixEpoch) {
			// Over long ago; and 0001/01/01 00:00:00, the zero
			// time, is not "never".
			t = unixEpoch
		}
		return t, err == nil
	case len(f) == 2 && f[0] == "epoch":
		n, err := strconv.ParseInt(f[1], 10, 64)
		return time.Unix(n, 0), err == nil && n >= 0 && n <= maxLeaseEnd
	}
	return time.Time{}, false
}

package rebind

import "github.com/miekg/dns"

// LocalZones are the names (and the names below them) whose answers keep
// their private addresses whatever rebind_allow says: they are the home
// network's own (spec section 15). Single-label names are exempt too.
var LocalZones = []string{"lan.", "home.arpa.", "local.", "internal."}

// under reports whether name, a fully qualified name in presentation
// format (escapes as miekg/dns writes them), is zone or lies below it,
// ASCII case aside. zone is lower-case and fully qualified; "." holds
// every name. A dot that is escaped ("a\.lan.") is no label boundary.
func under[T string | []byte](name T, zone string) bool {
	if zone == "." {
		return true
	}
	n, z := len(name), len(zone)
	if n < z {
		return false
	}
	for i := range z {
		if lower(name[n-z+i]) != zone[i] {
			return false
		}
	}
	if n == z {
		return true
	}
	if name[n-z-1] != '.' {
		return false
	}
	// The dot before the zone must not be escaped: an even number of
	// backslashes stands before it.
	bs := 0
	for i := n - z - 2; i >= 0 && name[i] == '\\'; i-- {
		bs++
	}
	return bs%2 == 0
}

// lower is c in lower case when it is an ASCII capital letter.
func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// singleLabel reports whether name, fully qualified in presentation
// format, has exactly one label ("nas.").
func singleLabel[T string | []byte](name T) bool {
	if len(name) < 2 || name[len(name)-1] != '.' {
		return false
	}
	for i := 0; i < len(name)-1; i++ {
		switch name[i] {
		case '.':
			return false
		case '\\':
			i++ // an escaped byte, a dot perhaps, inside the label
		}
	}
	return true
}

// localName reports whether name is exempt as the home network's own: a
// single label, or under one of LocalZones.
func localName[T string | []byte](name T) bool {
	if singleLabel(name) {
		return true
	}
	for _, z := range LocalZones {
		if under(name, z) {
			return true
		}
	}
	return false
}

// wireQName writes the question name of msg, which starts at the header's
// end without compression pointers, into buf in presentation format, lower
// case, and returns it. ok is false when the name is not plain: a label
// holding a dot, a backslash or a byte outside printable ASCII, which
// presentation format would escape. Callers then judge the name from the
// parsed message instead.
func wireQName(msg []byte, buf *[256]byte) (name []byte, ok bool) {
	n := 0
	for off := 12; off < len(msg); {
		l := int(msg[off])
		if l == 0 {
			if n == 0 {
				buf[0] = '.'
				n = 1
			}
			return buf[:n], true
		}
		if l&0xC0 != 0 || off+1+l > len(msg) || n+l+1 > len(buf) {
			return nil, false
		}
		for _, c := range msg[off+1 : off+1+l] {
			if c <= ' ' || c >= 0x7F || c == '.' || c == '\\' {
				return nil, false
			}
			buf[n] = lower(c)
			n++
		}
		buf[n] = '.'
		n++
		off += 1 + l
	}
	return nil, false
}

// canonicalZones returns names as lower-case fully qualified names.
func canonicalZones(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, dns.CanonicalName(n))
	}
	return out
}

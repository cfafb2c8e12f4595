package server

import (
	"encoding/binary"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// CacheMaxAge is the max-age of a DoH answer's Cache-Control (RFC 8484
// section 5.1, spec section 14): the smallest TTL in msg's answer section;
// for a negative answer (NXDOMAIN, or NOERROR without answers) the smaller
// of its SOA's TTL and MINIMUM (RFC 2308); else 0 (an error, a negative
// answer without an SOA, a message that cannot be read), so that no HTTP
// cache keeps what a DNS cache would not. It reads the bytes in place.
func CacheMaxAge(msg []byte) uint32 {
	if len(msg) < dnsmsg.HeaderLen {
		return 0
	}
	qd := int(binary.BigEndian.Uint16(msg[4:]))
	an := int(binary.BigEndian.Uint16(msg[6:]))
	ns := int(binary.BigEndian.Uint16(msg[8:]))
	rcode := int(msg[3] & 0x0F)
	off := dnsmsg.HeaderLen
	for range qd {
		if off = dnsmsg.NameEnd(msg, off); off < 0 || off+4 > len(msg) {
			return 0
		}
		off += 4
	}
	if an > 0 {
		least, found := uint32(0), false
		for range an {
			var ttl uint32
			var ok bool
			if off, _, ttl, ok = nextRecord(msg, off); !ok {
				return 0
			}
			if !found || ttl < least {
				least, found = ttl, true
			}
		}
		return least
	}
	if rcode != dns.RcodeSuccess && rcode != dns.RcodeNameError {
		return 0
	}
	for range ns {
		next, typ, ttl, ok := nextRecord(msg, off)
		if !ok {
			return 0
		}
		if typ == dns.TypeSOA && next-off >= 20 {
			// MINIMUM is the last field of the SOA's RDATA.
			minimum := ttlValue(binary.BigEndian.Uint32(msg[next-4:]))
			return min(ttl, minimum)
		}
		off = next
	}
	return 0
}

// nextRecord reads the record at msg[off:] and returns the offset past it,
// its type and its TTL; false when it does not fit in msg.
func nextRecord(msg []byte, off int) (next int, typ uint16, ttl uint32, ok bool) {
	if off = dnsmsg.NameEnd(msg, off); off < 0 || off+10 > len(msg) {
		return 0, 0, 0, false
	}
	typ = binary.BigEndian.Uint16(msg[off:])
	ttl = ttlValue(binary.BigEndian.Uint32(msg[off+4:]))
	next = off + 10 + int(binary.BigEndian.Uint16(msg[off+8:]))
	if next > len(msg) {
		return 0, 0, 0, false
	}
	return next, typ, ttl, true
}

// ttlValue reads a TTL as RFC 2181 section 8 says: one with the top bit
// set is 0.
func ttlValue(v uint32) uint32 {
	if v > 1<<31-1 {
		return 0
	}
	return v
}

package rebind

import (
	"encoding/binary"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// Wire-format sizes the scan needs (RFC 1035 4.1, RFC 9460 2.2).
const (
	rrFixedLen  = 10 // TYPE, CLASS, TTL, RDLENGTH after an owner name
	svcKeyV4    = 4  // SvcParamKey ipv4hint: a list of 4-byte addresses
	svcKeyV6    = 6  // SvcParamKey ipv6hint: a list of 16-byte addresses
	svcFixedLen = 2  // SvcPriority, before the target name
)

// scan reports whether msg, a whole DNS message, holds an address that
// Private judges private: in the RDATA of an A or AAAA record, or in the
// ipv4hint or ipv6hint of an HTTPS or SVCB record, in any section. It
// reads the bytes where they lie, with the project's name walker
// (dnsmsg.NameEnd), and allocates nothing. ok is false when msg could not
// be walked to its last record (a name it does not vouch for, a record
// past the end): the caller then parses it to be sure.
func scan(msg []byte) (found, ok bool) {
	if len(msg) < dnsmsg.HeaderLen {
		return false, false
	}
	qd := int(binary.BigEndian.Uint16(msg[4:]))
	n := int(binary.BigEndian.Uint16(msg[6:])) + int(binary.BigEndian.Uint16(msg[8:])) +
		int(binary.BigEndian.Uint16(msg[10:]))
	off := dnsmsg.HeaderLen
	for range qd {
		if off = dnsmsg.NameEnd(msg, off); off < 0 || off+4 > len(msg) {
			return false, false
		}
		off += 4
	}
	for range n {
		if off = dnsmsg.NameEnd(msg, off); off < 0 || off+rrFixedLen > len(msg) {
			return false, false
		}
		typ := binary.BigEndian.Uint16(msg[off:])
		rdata := off + rrFixedLen
		end := rdata + int(binary.BigEndian.Uint16(msg[off+8:]))
		if end > len(msg) {
			return false, false
		}
		switch typ {
		case dns.TypeA:
			if end-rdata != 4 {
				return false, false
			}
			if private4(msg[rdata:end]) {
				return true, true
			}
		case dns.TypeAAAA:
			if end-rdata != 16 {
				return false, false
			}
			if private6(msg[rdata:end]) {
				return true, true
			}
		case dns.TypeHTTPS, dns.TypeSVCB:
			found, ok := scanSVCB(msg[:end], rdata)
			if !ok || found {
				return found, ok
			}
		}
		off = end
	}
	return false, true
}

// scanSVCB is scan for the RDATA of an HTTPS or SVCB record at msg[off:],
// msg cut at the record's end: SvcPriority, TargetName (never compressed,
// RFC 9460 2.2), then SvcParams, each a key, a length and a value.
func scanSVCB(msg []byte, off int) (found, ok bool) {
	if off+svcFixedLen > len(msg) {
		return false, false
	}
	if off = dnsmsg.NameEnd(msg, off+svcFixedLen); off < 0 {
		return false, false
	}
	for off < len(msg) {
		if off+4 > len(msg) {
			return false, false
		}
		key := binary.BigEndian.Uint16(msg[off:])
		v := off + 4
		end := v + int(binary.BigEndian.Uint16(msg[off+2:]))
		if end > len(msg) {
			return false, false
		}
		switch key {
		case svcKeyV4:
			if (end-v)%4 != 0 {
				return false, false
			}
			for a := v; a < end; a += 4 {
				if private4(msg[a : a+4]) {
					return true, true
				}
			}
		case svcKeyV6:
			if (end-v)%16 != 0 {
				return false, false
			}
			for a := v; a < end; a += 16 {
				if private6(msg[a : a+16]) {
					return true, true
				}
			}
		}
		off = end
	}
	return false, true
}

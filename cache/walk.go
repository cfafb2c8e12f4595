package cache

import (
	"encoding/binary"
	"strings"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// The parts of a DNS message the walker reads (RFC 1035 4.1).
const (
	headerLen  = dnsmsg.HeaderLen
	maxNameLen = 255 // a name's wire length, its root label included

	typeSOA = 6
	typeOPT = 41

	flagQR     = dnsmsg.FlagQR
	flagTC     = dnsmsg.FlagTC
	maskOpcode = dnsmsg.MaskOpcode
	maskRcode  = dnsmsg.MaskRcode

	rcodeSuccess  = 0
	rcodeServFail = 2
	rcodeNXDomain = 3

	// maxTTL is the largest TTL a record carries: RFC 2181 8 reads a TTL
	// with the top bit set as 0.
	maxTTL = 1<<31 - 1
)

// shape is what the walker learnt of an answer.
type shape struct {
	rcode      int
	qend       int // just past the question
	an, ns, ar int // the section counts, the OPT included in ar
	optStart   int // the OPT record's first byte, -1 when there is none
	end        int // just past the last record
	nttl       int // the records whose TTL the cache lowers: all but the OPT
	minTTL     uint32
	// soaTTL and soaMinimum are the first SOA's of the authority section;
	// soaTTLOff is the offset of its TTL, -1 when there is none.
	soaTTL, soaMinimum uint32
	soaTTLOff          int
}

// walk reads msg, a whole response, record by record. It reports false for
// anything it cannot vouch for: a header that is not a response to a
// query (QR, opcode QUERY), not exactly one question, a question name with
// a compression pointer, a malformed name, a record past the end, bytes
// past the last record, more than one OPT, or an OPT that is not the last
// record (dropping it must leave every offset before it as it was).
// minTTL is the smallest TTL of the answer and authority records, each
// clamped to [lo, hi] first.
func walk(msg []byte, lo, hi uint32) (shape, bool) {
	s := shape{optStart: -1, soaTTLOff: -1, minTTL: hi}
	if len(msg) < headerLen {
		return s, false
	}
	flags := binary.BigEndian.Uint16(msg[2:])
	if flags&flagQR == 0 || flags&maskOpcode != 0 || binary.BigEndian.Uint16(msg[4:]) != 1 {
		return s, false
	}
	s.rcode = int(flags & maskRcode)
	s.an = int(binary.BigEndian.Uint16(msg[6:]))
	s.ns = int(binary.BigEndian.Uint16(msg[8:]))
	s.ar = int(binary.BigEndian.Uint16(msg[10:]))
	if n := dnsmsg.QuestionLen(msg[headerLen:]); n > 0 {
		s.qend = headerLen + n
	} else {
		return s, false
	}
	off := s.qend
	for i := range s.an + s.ns + s.ar {
		start := off
		fixed, end := dnsmsg.RecordFrame(msg, off)
		if fixed < 0 {
			return s, false
		}
		typ := binary.BigEndian.Uint16(msg[fixed:])
		switch {
		case typ == typeOPT:
			if i < s.an+s.ns || s.optStart >= 0 || i != s.an+s.ns+s.ar-1 {
				return s, false
			}
			s.optStart = start
			// The extended rcode's upper eight bits (RFC 6891 6.1.3).
			s.rcode |= int(msg[fixed+4]) << 4
		default:
			s.nttl++
			if i < s.an+s.ns {
				s.minTTL = min(s.minTTL, clamp(binary.BigEndian.Uint32(msg[fixed+4:]), lo, hi))
			}
			if typ == typeSOA && i >= s.an && i < s.an+s.ns && s.soaTTLOff < 0 {
				if end-fixed-dnsmsg.RRFixedLen < 22 { // two names of one byte at least, five numbers
					return s, false
				}
				s.soaTTLOff = fixed + 4
				s.soaTTL = readTTL(msg[fixed+4:])
				s.soaMinimum = readTTL(msg[end-4:])
			}
		}
		off = end
	}
	if off != len(msg) {
		return s, false
	}
	s.end = off
	return s, true
}

// readTTL reads a TTL, a top bit set read as 0 (RFC 2181 8).
func readTTL(b []byte) uint32 {
	ttl := binary.BigEndian.Uint32(b)
	if ttl > maxTTL {
		return 0
	}
	return ttl
}

// clamp is ttl, read as readTTL does, within [lo, hi].
func clamp(ttl, lo, hi uint32) uint32 {
	if ttl > maxTTL {
		ttl = 0
	}
	return min(max(ttl, lo), hi)
}

// ttlOffsets walks msg, an answer as the cache stores it (no OPT: walk
// vouched for it), and calls f with the offset of every record's TTL.
func ttlOffsets(msg []byte, qend int, f func(off int)) {
	n := int(binary.BigEndian.Uint16(msg[6:])) + int(binary.BigEndian.Uint16(msg[8:])) +
		int(binary.BigEndian.Uint16(msg[10:]))
	off := qend
	for range n {
		fixed, end := dnsmsg.RecordFrame(msg, off)
		f(fixed + 4)
		off = end
	}
}

// nameIs reports whether the uncompressed wire name at the start of w is
// name, a fully qualified name in presentation format (escapes \X and
// \DDD read as miekg/dns writes them), ASCII letter case aside.
func nameIs(w []byte, name string) bool {
	if name == "." {
		return len(w) > 0 && w[0] == 0
	}
	if strings.IndexByte(name, '\\') < 0 {
		return plainNameIs(w, name)
	}
	p := 0 // in name
	for off := 0; off < len(w); {
		l := int(w[off])
		off++
		if l == 0 {
			return p == len(name)
		}
		if off+l > len(w) {
			return false
		}
		for _, c := range w[off : off+l] {
			b, next, ok := presentationByte(name, p)
			if !ok || dnsmsg.LowerASCII(b) != dnsmsg.LowerASCII(c) {
				return false
			}
			p = next
		}
		off += l
		if p >= len(name) || name[p] != '.' {
			return false
		}
		p++
	}
	return false
}

// plainNameIs is nameIs for a name without escapes: its labels are the
// wire labels' bytes.
func plainNameIs(w []byte, name string) bool {
	p := 0
	for off := 0; off < len(w); {
		l := int(w[off])
		off++
		if l == 0 {
			return p == len(name)
		}
		if off+l > len(w) || p+l >= len(name) || name[p+l] != '.' {
			return false
		}
		for i, c := range w[off : off+l] {
			if dnsmsg.LowerASCII(c) != dnsmsg.LowerASCII(name[p+i]) {
				return false
			}
		}
		off += l
		p += l + 1
	}
	return false
}

// presentationByte decodes the byte at name[p:], an escape or a plain
// byte, and returns it with the offset past it.
func presentationByte(name string, p int) (b byte, next int, ok bool) {
	if p >= len(name) || name[p] == '.' {
		return 0, 0, false
	}
	if name[p] != '\\' {
		return name[p], p + 1, true
	}
	if p+1 >= len(name) {
		return 0, 0, false
	}
	if p+3 < len(name) && isDigit(name[p+1]) && isDigit(name[p+2]) && isDigit(name[p+3]) {
		v := int(name[p+1]-'0')*100 + int(name[p+2]-'0')*10 + int(name[p+3]-'0')
		if v > 255 {
			return 0, 0, false
		}
		return byte(v), p + 4, true
	}
	return name[p+1], p + 2, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

package dnsmsg

import (
	"encoding/binary"

	"github.com/miekg/dns"
)

// AnswerLayout is where the parts of an answer that the query path edits
// lie in its bytes. The ID is the first two bytes and ARCOUNT bytes 10 and
// 11, as in every message; an OPT record's fields lie at fixed distances
// from its first byte: the type at +1, the UDP payload size (its class) at
// +3, the extended rcode at +5, the version at +6, the flags (DO is the top
// bit) at +7, RDLENGTH at +9 and the options from +11 to OPTEnd.
type AnswerLayout struct {
	// QuestionEnd is the offset just past the question section, the one
	// question, which starts at offset 12 and holds no compression
	// pointer: it is exactly as long as the query's.
	QuestionEnd int
	// OPT is the offset of the OPT record's first byte (its owner name,
	// the root) in the additional section, -1 when there is none.
	OPT int
	// OPTEnd is the offset just past the OPT record, -1 when there is
	// none.
	OPTEnd int
	// Rcode is the answer's rcode: the header's four bits, with the OPT
	// record's extended bits above them (RFC 6891 6.1.3), as miekg/dns
	// reports it in dns.Msg.Rcode.
	Rcode int
}

// LayoutAnswer reports whether raw, an upstream's answer to the packed query
// q (header + exactly one question, possibly an OPT; its ID is ignored),
// received for wire ID id, can be forwarded as it is, and where its parts lie.
//
// It is a conservative, allocation-free stand-in for decodeReply: when it
// reports true, raw is a response (QR set, opcode QUERY) with ID id, not
// REFUSED, to q's question (the name equal but for ASCII case, written
// without compression pointers; type and class equal), and decodeReply
// would accept it, with no record that miekg/dns parses leniently. Its
// records exactly fill the message, and each is of a type whose RDATA it
// checks strictly: A, AAAA, NS, CNAME, PTR, DNAME, MX, TXT, SOA and SRV of
// class IN, and one OPT (see optionsOK) in the additional section. Anything
// else, a DNSSEC record or a record of a type or class it does not know,
// makes it report false, and so do a malformed q and every answer it is
// unsure of: the caller then takes the slow path, decodeReply, which tells
// a bad answer from one only unusual. The layout is meaningful only with
// true.
func LayoutAnswer(q, raw []byte, id uint16) (AnswerLayout, bool) {
	var none AnswerLayout
	if len(raw) < HeaderLen || len(q) < HeaderLen ||
		binary.BigEndian.Uint16(raw) != id ||
		Flags(raw)&FlagQR == 0 || Flags(raw)&MaskOpcode != 0 ||
		Flags(raw)&MaskRcode == dns.RcodeRefused ||
		binary.BigEndian.Uint16(raw[4:]) != 1 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return none, false
	}
	qlen := QuestionLen(q[HeaderLen:])
	l := AnswerLayout{QuestionEnd: HeaderLen + qlen, OPT: -1, OPTEnd: -1, Rcode: int(Flags(raw) & MaskRcode)}
	if qlen == 0 || len(raw) < l.QuestionEnd ||
		!EqualFoldASCII(raw[HeaderLen:l.QuestionEnd-4], q[HeaderLen:l.QuestionEnd-4]) ||
		string(raw[l.QuestionEnd-4:l.QuestionEnd]) != string(q[l.QuestionEnd-4:l.QuestionEnd]) {
		return none, false
	}

	an := int(binary.BigEndian.Uint16(raw[6:]))
	ns := int(binary.BigEndian.Uint16(raw[8:]))
	ar := int(binary.BigEndian.Uint16(raw[10:]))
	off := l.QuestionEnd
	for i := range an + ns + ar {
		start := off
		fixed, end := RecordFrame(raw, off)
		if fixed < 0 {
			return none, false
		}
		typ := binary.BigEndian.Uint16(raw[fixed:])
		class := binary.BigEndian.Uint16(raw[fixed+2:])
		rdata := fixed + RRFixedLen
		if typ == dns.TypeOPT {
			// One OPT, owned by the root written as such, in the
			// additional section, of EDNS version 0 (the TTL's second
			// byte; the first holds the extended rcode bits).
			if i < an+ns || l.OPT >= 0 || fixed != start+1 || raw[start] != 0 ||
				raw[fixed+5] != 0 || !optionsOK(raw[rdata:end]) {
				return none, false
			}
			l.OPT, l.OPTEnd = start, end
			l.Rcode |= int(raw[fixed+4]) << 4
		} else if class != dns.ClassINET || !rdataOK(raw[:end], typ, rdata) {
			return none, false
		}
		off = end
	}
	if off != len(raw) { // trailing bytes, which miekg/dns would ignore
		return none, false
	}
	return l, true
}

// RecordFrame reads the frame of the resource record at msg[off:]: it
// returns fixed, the offset just past its owner name (well formed, see
// NameEnd), where TYPE, CLASS, TTL (at +4) and RDLENGTH lie, and end,
// just past its RDATA, which begins at fixed+RRFixedLen; fixed is -1 when
// the record does not lie within msg. It is the one record walker: the
// answer layout's and the cache's.
func RecordFrame(msg []byte, off int) (fixed, end int) {
	fixed = NameEnd(msg, off)
	if fixed < 0 || fixed+RRFixedLen > len(msg) {
		return -1, -1
	}
	end = fixed + RRFixedLen + int(binary.BigEndian.Uint16(msg[fixed+8:]))
	if end > len(msg) {
		return -1, -1
	}
	return fixed, end
}

// Wire-format constants beyond those of header.go.
const (
	// RRFixedLen is the length of a record's TYPE, CLASS, TTL and
	// RDLENGTH, after its owner name.
	RRFixedLen = 10

	// maxPointers is the most compression pointers one name may follow:
	// miekg/dns gives up past 126. A name as a compressor writes it takes
	// at most one per label, and names of 126 labels are not seen in
	// answers.
	maxPointers = 126
)

// EqualFoldASCII reports whether a and b are equal but for the case of
// ASCII letters, as domain names compare (RFC 4343). Applied to two
// uncompressed wire-format names it compares labels: a length byte (at most
// 63) is no letter, so it only matches itself and the names' label
// boundaries must coincide.
func EqualFoldASCII(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if LowerASCII(a[i]) != LowerASCII(b[i]) {
			return false
		}
	}
	return true
}

// LowerASCII returns c in lower case when it is an ASCII capital letter,
// else c.
func LowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// NameEnd returns the offset just past the name at msg[off:], or -1 when
// it is not well formed: labels of 1 to 63 bytes (the reserved label types
// 0x40 and 0x80 are refused, as miekg/dns does), at most 255 bytes
// expanded, all of it within msg. Every compression pointer must point
// strictly before the part of the name that holds it (the name's first
// byte, or the target of the previous pointer) and past the header: so
// the targets decrease, no pointer loops, and no pointer points forward at
// bytes a compressor could not have written yet. miekg/dns follows any
// pointer, up to maxPointers of them; these are a subset.
func NameEnd(msg []byte, off int) int {
	end := -1    // just past the first pointer, once one is followed
	start := off // where the labels being read began
	expanded := 0
	for hops := 0; off < len(msg); {
		c := int(msg[off])
		switch c & 0xC0 {
		case 0x00:
			if c == 0 {
				if end < 0 {
					end = off + 1
				}
				return end
			}
			// With the root label to follow, the name must stay
			// within maxNameLen.
			if expanded += c + 1; expanded >= maxNameLen {
				return -1
			}
			off += c + 1
		case 0xC0:
			if off+1 >= len(msg) || hops == maxPointers {
				return -1
			}
			target := (c&0x3F)<<8 | int(msg[off+1])
			if target < HeaderLen || target >= start {
				return -1
			}
			if end < 0 {
				end = off + 2
			}
			hops++
			start, off = target, target
		default:
			return -1
		}
	}
	return -1
}

// rdataOK reports whether msg[off:], the RDATA of a record of type typ
// (class IN), is exactly what that type's RDATA must be. msg is the message
// cut at the end of the record, as miekg/dns cuts it, so that no name in
// the RDATA runs past it. Only RDATA that miekg/dns unpacks in full and
// packs back the same passes: a short one (miekg/dns leaves the missing
// fields zero) or a long one (it fails) does not, and no other type does
// either.
func rdataOK(msg []byte, typ uint16, off int) bool {
	switch typ {
	case dns.TypeA:
		return len(msg)-off == 4
	case dns.TypeAAAA:
		return len(msg)-off == 16
	case dns.TypeNS, dns.TypeCNAME, dns.TypePTR, dns.TypeDNAME:
		return NameEnd(msg, off) == len(msg)
	case dns.TypeMX: // preference, exchange
		return NameEnd(msg, off+2) == len(msg)
	case dns.TypeSRV: // priority, weight, port, target
		return NameEnd(msg, off+6) == len(msg)
	case dns.TypeSOA: // mname, rname, then serial, refresh, retry, expire, minimum
		mbox := NameEnd(msg, off)
		if mbox < 0 {
			return false
		}
		serial := NameEnd(msg, mbox)
		return serial >= 0 && len(msg)-serial == 20
	case dns.TypeTXT:
		// One or more <character-string>s, each a length byte and that
		// many bytes. Empty RDATA is no TXT record, though miekg/dns
		// takes it for one with no strings.
		if off == len(msg) {
			return false
		}
		for off < len(msg) {
			off += 1 + int(msg[off])
		}
		return off == len(msg)
	}
	return false
}

// optionsOK reports whether b, an OPT record's RDATA, is a sequence of EDNS
// options (code, length, data) that fills it exactly, each of a kind an
// upstream is expected to answer with and that miekg/dns unpacks whatever
// its data, or whose length it checks. An option of another kind (client
// subnet, which nxdnsd never asks for, or one miekg/dns may learn to parse
// strictly in a later version) makes it false.
func optionsOK(b []byte) bool {
	for off := 0; off < len(b); {
		if off+4 > len(b) {
			return false
		}
		code := binary.BigEndian.Uint16(b[off:])
		n := int(binary.BigEndian.Uint16(b[off+2:]))
		if off += 4 + n; off > len(b) {
			return false
		}
		switch code {
		case dns.EDNS0NSID, dns.EDNS0COOKIE, dns.EDNS0PADDING:
		case dns.EDNS0TCPKEEPALIVE: // RFC 7828: the timeout or nothing
			if n != 0 && n != 2 {
				return false
			}
		case dns.EDNS0EDE: // RFC 8914: an info code, then text
			if n < 2 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

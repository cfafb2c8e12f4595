package query

import (
	"encoding/binary"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// packedQueryLen holds a trimmed query: a header, a question of at most 259
// bytes and an OPT record with a cookie and padding.
const packedQueryLen = 512

// optLen is an OPT record without options: root name, type, class (the UDP
// size), TTL (extended rcode, version, flags), RDLENGTH.
const optLen = 11

// adoptRaw is adopt and fit on the bytes of an answer that came through the
// byte path: packed is the query sent (its question is the client's,
// spelled as the client wrote it), raw the answer, l its layout. It edits
// raw in place and returns the answer to send and its rcode, or ok false
// when the bytes cannot be used as they are (the answer is too large for
// the client's UDP size), in which case raw still holds a whole message for
// the slow path to parse.
func (r *request) adoptRaw(raw []byte, l dnsmsg.AnswerLayout, packed []byte) (out []byte, rcode int, ok bool) {
	if len(packed) < l.QuestionEnd {
		return raw, 0, false // LayoutAnswer matched the questions: never
	}
	binary.BigEndian.PutUint16(raw, r.id)
	if !r.keepsAD() {
		binary.BigEndian.PutUint16(raw[2:], dnsmsg.Flags(raw)&^dnsmsg.FlagAD)
	}
	// The questions are equal but for the case of letters: the client's
	// spelling goes back.
	copy(raw[dnsmsg.HeaderLen:l.QuestionEnd], packed[dnsmsg.HeaderLen:l.QuestionEnd])

	rcode = l.Rcode
	switch {
	case l.OPT >= 0 && r.edns:
		binary.BigEndian.PutUint16(raw[l.OPT+3:], dnsmsg.EDNSSize)
	case l.OPT >= 0 && rcode <= 0xF:
		n := copy(raw[l.OPT:], raw[l.OPTEnd:])
		raw = raw[:l.OPT+n]
		binary.BigEndian.PutUint16(raw[10:], binary.BigEndian.Uint16(raw[10:])-1)
	case l.OPT < 0 && r.edns:
		raw = appendOPT(raw, r.do, 0)
	}
	if len(raw) > r.limit {
		return raw, rcode, false
	}
	return raw, rcode, true
}

// appendOPT appends an OPT record advertising dnsmsg.EDNSSize, with the DO
// bit when do is set and, when code is not 0, an Extended DNS Error with
// that code and no text, to the message in b, and counts it in ARCOUNT.
func appendOPT(b []byte, do bool, code uint16) []byte {
	var flags byte
	if do {
		flags = 0x80 // DO is the top bit of the OPT's flags (RFC 3225)
	}
	var rdlen byte
	if code != 0 {
		rdlen = 6 // option code, option length, INFO-CODE
	}
	b = append(b, 0, 0, byte(dns.TypeOPT), dnsmsg.EDNSSize>>8, dnsmsg.EDNSSize&0xFF, 0, 0, flags, 0, 0, rdlen)
	if code != 0 {
		b = append(b, 0, byte(dns.EDNS0EDE), 0, 2, byte(code>>8), byte(code))
	}
	binary.BigEndian.PutUint16(b[10:], binary.BigEndian.Uint16(b[10:])+1)
	return b
}

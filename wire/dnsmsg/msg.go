package dnsmsg

import (
	"encoding/binary"

	"github.com/miekg/dns"
)

// ClientUDPSize returns the largest UDP answer q's sender accepts: its EDNS
// payload size clamped to 512..65535 (RFC 6891 6.2.5 treats less than 512
// as 512), or 512 without EDNS (RFC 1035).
func ClientUDPSize(q *dns.Msg) int {
	opt := q.IsEdns0()
	if opt == nil {
		return dns.MinMsgSize
	}
	return max(int(opt.UDPSize()), dns.MinMsgSize) // a uint16 is at most 65535
}

// Refused returns a REFUSED reply to the query in raw without unpacking it:
// the overload path answers from the header and question bytes alone. See
// Reply for what the reply holds and when it is nil.
func Refused(raw []byte) []byte { return Reply(raw, dns.RcodeRefused) }

// maxNameLen is the most octets of a wire-format name, root label included.
const maxNameLen = 255

// Reply builds the reply with rcode to raw from its 12-byte header and
// question: raw's ID, opcode, RD and CD, QR and RA set, and raw's question
// when it has exactly one that can be walked (otherwise none). It carries no
// OPT record: nothing beyond the question is read. It returns nil when raw
// is shorter than a header, and when raw is itself a response: answering
// responses lets two servers loop.
func Reply(raw []byte, rcode int) []byte {
	if len(raw) < HeaderLen || Flags(raw)&FlagQR != 0 {
		return nil
	}
	qlen := 0
	if binary.BigEndian.Uint16(raw[4:]) == 1 {
		qlen = QuestionLen(raw[HeaderLen:])
	}
	out := make([]byte, HeaderLen+qlen)
	copy(out, raw[:2])
	binary.BigEndian.PutUint16(out[2:], FlagQR|FlagRA|Flags(raw)&(MaskOpcode|FlagRD|FlagCD)|uint16(rcode)&MaskRcode)
	if qlen > 0 {
		out[5] = 1 // QDCOUNT; the other counts stay 0
		copy(out[HeaderLen:], raw[HeaderLen:HeaderLen+qlen])
	}
	return out
}

// QuestionLen returns the length of the question at the start of b, a
// message's bytes from offset HeaderLen (name, type and class), or 0 when
// there is no well-formed one. A compression
// pointer cannot occur in a first question (it would point into the
// header), so it counts as malformed.
func QuestionLen(b []byte) int {
	off := 0
	for {
		if off >= len(b) {
			return 0
		}
		l := int(b[off])
		off++
		if l == 0 {
			break
		}
		if l&0xC0 != 0 { // a pointer or a reserved label type
			return 0
		}
		off += l
		if off >= maxNameLen { // the root label still has to follow
			return 0
		}
	}
	if off+4 > len(b) {
		return 0
	}
	return off + 4
}

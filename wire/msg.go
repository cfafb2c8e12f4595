package wire

import (
	"encoding/binary"

	"github.com/miekg/dns"
)

// replyUDPSize is the EDNS payload size nxdnsd's own replies advertise:
// 1232 bytes, the DNS Flag Day 2020 value, which avoids IP fragmentation on
// nearly every path.
const replyUDPSize = 1232

// NewReply returns an empty reply to q with rcode: q's ID, opcode, RD and CD
// bits and question, QR and RA set (nxdnsd offers recursion). When q has an
// OPT record the reply has one too (RFC 6891 6.1.1), advertising
// replyUDPSize and echoing the DO bit (RFC 3225). rcode must fit the header
// (0..15) unless q has an OPT record. q is not modified.
func NewReply(q *dns.Msg, rcode int) *dns.Msg {
	r := &dns.Msg{
		MsgHdr: dns.MsgHdr{
			Id:                 q.Id,
			Response:           true,
			Opcode:             q.Opcode,
			RecursionDesired:   q.RecursionDesired,
			RecursionAvailable: true,
			CheckingDisabled:   q.CheckingDisabled,
			Rcode:              rcode,
		},
		Question: append([]dns.Question(nil), q.Question...),
	}
	if qopt := q.IsEdns0(); qopt != nil {
		opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		opt.SetUDPSize(replyUDPSize)
		opt.SetDo(qopt.Do())
		r.Extra = []dns.RR{opt}
	}
	return r
}

// ServFail returns the SERVFAIL reply to q, as NewReply builds it: what the
// client gets when the pool or a forward zone fails.
func ServFail(q *dns.Msg) *dns.Msg { return NewReply(q, dns.RcodeServerFailure) }

// NXDomain returns the NXDOMAIN reply to q, as NewReply builds it.
func NXDomain(q *dns.Msg) *dns.Msg { return NewReply(q, dns.RcodeNameError) }

// NotImp returns the NOTIMP reply to q (an opcode other than QUERY), as
// NewReply builds it.
func NotImp(q *dns.Msg) *dns.Msg { return NewReply(q, dns.RcodeNotImplemented) }

// RefusedReply returns the REFUSED reply to a parsed q, as NewReply builds
// it. Refused does the same from raw bytes.
func RefusedReply(q *dns.Msg) *dns.Msg { return NewReply(q, dns.RcodeRefused) }

// FormErrReply returns the FORMERR reply to a parsed q (one that parsed but
// does not have exactly one question), as NewReply builds it. FormErr does
// the same from raw bytes.
func FormErrReply(q *dns.Msg) *dns.Msg { return NewReply(q, dns.RcodeFormatError) }

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

// FitUDP makes resp fit a UDP answer of size bytes (ClientUDPSize of the
// query): when it is larger, whole records are dropped from the end, TC is
// set and the OPT record is kept, so the client retries over TCP knowing
// the server speaks EDNS. It wraps (*dns.Msg).Truncate, which does exactly
// that; a size below 512 counts as 512.
func FitUDP(resp *dns.Msg, size int) {
	resp.Truncate(size)
}

// Refused returns a REFUSED reply to the query in raw without unpacking it:
// the overload path answers from the header and question bytes alone. See
// rawReply for what the reply holds and when it is nil.
func Refused(raw []byte) []byte { return rawReply(raw, dns.RcodeRefused) }

// FormErr returns a FORMERR reply to the malformed query in raw, built from
// its header and, when it can be walked, its one question. See rawReply for
// what the reply holds and when it is nil.
func FormErr(raw []byte) []byte { return rawReply(raw, dns.RcodeFormatError) }

// Header bits (RFC 1035 4.1.1), by byte.
const (
	bitQR      = 0x80 // byte 2
	maskOpRD   = 0x79 // byte 2: opcode (0x78) and RD (0x01)
	bitRA      = 0x80 // byte 3
	bitCD      = 0x10 // byte 3
	maxNameLen = 255  // octets of a wire-format name, root label included
)

// rawReply builds the reply with rcode to raw from its 12-byte header and
// question: raw's ID, opcode, RD and CD, QR and RA set, and raw's question
// when it has exactly one that can be walked (otherwise none). It carries no
// OPT record: nothing beyond the question is read. It returns nil when raw
// is shorter than a header, and when raw is itself a response: answering
// responses lets two servers loop.
func rawReply(raw []byte, rcode int) []byte {
	if len(raw) < headerLen || raw[2]&bitQR != 0 {
		return nil
	}
	qlen := 0
	if binary.BigEndian.Uint16(raw[4:]) == 1 {
		qlen = questionLen(raw[headerLen:])
	}
	out := make([]byte, headerLen+qlen)
	copy(out, raw[:2])
	out[2] = bitQR | raw[2]&maskOpRD
	out[3] = bitRA | raw[3]&bitCD | byte(rcode&0x0F)
	if qlen > 0 {
		out[5] = 1 // QDCOUNT; the other counts stay 0
		copy(out[headerLen:], raw[headerLen:headerLen+qlen])
	}
	return out
}

// questionLen returns the length of the question at the start of b (name,
// type and class), or 0 when there is no well-formed one. A compression
// pointer cannot occur in a first question (it would point into the
// header), so it counts as malformed.
func questionLen(b []byte) int {
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

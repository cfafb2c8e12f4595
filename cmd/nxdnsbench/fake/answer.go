package fake

import "encoding/binary"

// Wire constants of the answers the fake builds (RFC 1035 4.1).
const (
	headerLen = 12

	flagQR = 0x80 // in byte 2
	flagAA = 0x04 // in byte 2
	flagTC = 0x02 // in byte 2
	flagRA = 0x80 // in byte 3

	rcodeFormErr = 1
	rcodeRefused = 5

	typeA    = 1
	typeAAAA = 28
	classIN  = 1

	// answerTTL is short: nothing should cache a benchmark's answers.
	answerTTL = 60

	// namePointer is a compression pointer to offset 12, where the one
	// question's name starts in every message.
	namePointer = 0xC000 | headerLen

	// rrFixedLen is an answer record without its RDATA: the name pointer,
	// type, class, TTL and RDLENGTH.
	rrFixedLen = 2 + 2 + 2 + 4 + 2

	// Headroom is how many bytes past a query Respond may need: one
	// AAAA record, the largest answer it appends.
	Headroom = rrFixedLen + 16
)

// The addresses answered are from the documentation ranges (RFC 5737,
// RFC 3849): a benchmark's answers must never look like real ones.
var (
	answerA    = [4]byte{192, 0, 2, 1}
	answerAAAA = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
)

// Respond turns the query in b[:n] into its answer in place and returns the
// answer's length, or 0 when the datagram is to be dropped (shorter than a
// header, or a response already). len(b) must be at least n+Headroom.
//
// With rcode 0 a query for A or AAAA in class IN gets one record for its
// name, written as a compression pointer to the question; any other type
// gets an empty NOERROR answer. A nonzero rcode answers with that rcode and
// no records. Either way the question and the additional section (the
// client's OPT record, if any) are kept as they came, so the answer
// advertises the client's own EDNS payload size and DO bit back. A query
// that is not one well-formed question with empty answer and authority
// sections gets FORMERR, header only.
//
// Nothing is unpacked: the name is only walked to find where the question
// ends, and the record is inserted there by moving the additional section.
func Respond(b []byte, n, rcode int) int {
	if n < headerLen || b[2]&flagQR != 0 {
		return 0
	}
	end, qtype, qclass, ok := questionEnd(b[:n])
	if !ok {
		return formErr(b)
	}
	b[2] = b[2]&^(flagAA|flagTC) | flagQR
	b[3] = flagRA | byte(rcode&0xF)
	if rcode != 0 || qclass != classIN || (qtype != typeA && qtype != typeAAAA) {
		return n
	}

	rdata := answerA[:]
	if qtype == typeAAAA {
		rdata = answerAAAA[:]
	}
	rrLen := rrFixedLen + len(rdata)
	copy(b[end+rrLen:n+rrLen], b[end:n]) // the additional section moves up
	rr := b[end : end+rrLen]
	binary.BigEndian.PutUint16(rr[0:], namePointer)
	binary.BigEndian.PutUint16(rr[2:], qtype)
	binary.BigEndian.PutUint16(rr[4:], classIN)
	binary.BigEndian.PutUint32(rr[6:], answerTTL)
	binary.BigEndian.PutUint16(rr[10:], uint16(len(rdata)))
	copy(rr[rrFixedLen:], rdata)
	binary.BigEndian.PutUint16(b[6:], 1) // ANCOUNT
	return n + rrLen
}

// questionEnd checks that msg holds exactly one question and no answer or
// authority records, and returns the offset just past the question with
// its type and class.
func questionEnd(msg []byte) (end int, qtype, qclass uint16, ok bool) {
	if binary.BigEndian.Uint16(msg[4:]) != 1 || binary.BigEndian.Uint16(msg[6:]) != 0 ||
		binary.BigEndian.Uint16(msg[8:]) != 0 {
		return 0, 0, 0, false
	}
	off := headerLen
	for {
		if off >= len(msg) {
			return 0, 0, 0, false
		}
		l := int(msg[off])
		if l == 0 {
			off++
			break
		}
		if l&0xC0 != 0 {
			return 0, 0, 0, false // a pointer has nothing to point back to in a question
		}
		off += 1 + l
	}
	if off+4 > len(msg) {
		return 0, 0, 0, false
	}
	qtype = binary.BigEndian.Uint16(msg[off:])
	qclass = binary.BigEndian.Uint16(msg[off+2:])
	return off + 4, qtype, qclass, true
}

// formErr turns b into a header-only FORMERR answer and returns its length.
func formErr(b []byte) int {
	b[2] = b[2]&^(flagAA|flagTC) | flagQR
	b[3] = flagRA | rcodeFormErr
	clear(b[4:headerLen]) // no sections follow
	return headerLen
}

package query

import (
	"encoding/binary"
	"strings"

	"github.com/miekg/dns"
)

// ProtoUDP is the proto Serve's callers pass for datagram listeners. Answers
// over UDP are held to the client's EDNS UDP size; every other proto is a
// stream and carries answers whole.
const ProtoUDP = "udp"

// Header bits read from the raw query before it is parsed, so that a
// response can be dropped and a FORMERR built without trusting the body.
const (
	headerLen = 12
	bitQR     = 1 << 15
	bitRD     = 1 << 8
	bitCD     = 1 << 4
)

// request is one client query as the query path works on it.
//
// Once msg is handed to a zone or the pool it is theirs to read, possibly
// from other goroutines for a while (a transport still packing it, which
// also rewrites the OPT's extended rcode bits). So the query path keeps the
// client's EDNS in the copies below, and afterwards only reads the question,
// which nobody writes.
type request struct {
	id     uint16
	opcode int
	rd, cd bool

	// question is echoed in every answer: the client's one question exactly
	// as written, the questions of a NOTIMP query, nil in a FORMERR.
	question []dns.Question

	// lname is the question's name in lower case, for matching; "" unless
	// the query passed every check.
	lname string

	edns bool // the query carried an OPT record
	do   bool // ... with the DO bit

	// limit is the largest answer in bytes the client's transport takes.
	limit int

	// recheck is set when the answer came from a zone resolver or the
	// pool and may hold a record parsed leniently: pack then makes sure
	// that what it sends parses.
	recheck bool

	// msg is the client's query, trimmed to what a zone resolver or an
	// upstream may see; empty when the body could not be parsed. It lives in
	// the request to spare an allocation per query.
	msg dns.Msg
}

// parse reads a raw client query and checks it against step 1 of the
// resolution order. It returns nil when the query is to be dropped (shorter
// than a header, or a response). Otherwise reject is the rcode to refuse the
// query with, or dns.RcodeSuccess when the query may be resolved.
func parse(raw []byte, proto string) (r *request, reject int) {
	if len(raw) < headerLen {
		return nil, 0
	}
	bits := binary.BigEndian.Uint16(raw[2:])
	if bits&bitQR != 0 {
		// Answering a response invites reflection loops between servers.
		return nil, 0
	}
	r = &request{
		id:     binary.BigEndian.Uint16(raw),
		opcode: int(bits>>11) & 0xF,
		rd:     bits&bitRD != 0,
		cd:     bits&bitCD != 0,
		limit:  answerLimit(proto, false, 0),
	}

	m := &r.msg
	if err := m.Unpack(raw); err != nil || !countsMatch(raw, m) {
		*m = dns.Msg{}
		return r, dns.RcodeFormatError
	}

	opt, nopt := findOPT(m.Extra)
	if nopt > 1 {
		return r, dns.RcodeFormatError // RFC 6891 section 6.1.1
	}
	if opt != nil {
		r.edns, r.do = true, opt.Do()
		r.limit = answerLimit(proto, true, opt.UDPSize())
	}
	if m.Opcode != dns.OpcodeQuery {
		r.question = m.Question
		return r, dns.RcodeNotImplemented
	}
	if len(m.Question) != 1 {
		return r, dns.RcodeFormatError
	}
	r.question = m.Question
	if opt != nil && opt.Version() != 0 {
		return r, dns.RcodeBadVers // RFC 6891 section 6.1.3: we speak EDNS version 0 only
	}
	r.lname = strings.ToLower(m.Question[0].Name)
	trim(m, opt)
	return r, dns.RcodeSuccess
}

// countsMatch reports whether m holds as many records as raw's header
// announced. The parser stops quietly where a count overstates the body; a
// query whose header lies is malformed all the same.
func countsMatch(raw []byte, m *dns.Msg) bool {
	return int(binary.BigEndian.Uint16(raw[4:])) == len(m.Question) &&
		int(binary.BigEndian.Uint16(raw[6:])) == len(m.Answer) &&
		int(binary.BigEndian.Uint16(raw[8:])) == len(m.Ns) &&
		int(binary.BigEndian.Uint16(raw[10:])) == len(m.Extra)
}

// findOPT returns the last OPT record of extra and how many there are.
func findOPT(extra []dns.RR) (opt *dns.OPT, n int) {
	for _, rr := range extra {
		if o, ok := rr.(*dns.OPT); ok {
			opt = o
			n++
		}
	}
	return opt, n
}

// trim reduces the client's query to what is forwarded: the question, the
// RD, CD and AD bits, and the client's OPT record (DO bit and options),
// nothing else. Records a client put in other sections (a TSIG, say) mean
// nothing to an upstream.
func trim(m *dns.Msg, opt *dns.OPT) {
	m.MsgHdr = dns.MsgHdr{
		Id:                m.Id,
		Opcode:            dns.OpcodeQuery,
		RecursionDesired:  m.RecursionDesired,
		AuthenticatedData: m.AuthenticatedData,
		CheckingDisabled:  m.CheckingDisabled,
	}
	m.Answer, m.Ns = nil, nil
	if opt == nil {
		m.Extra = nil
	} else if len(m.Extra) != 1 {
		m.Extra = []dns.RR{opt}
	}
}

// answerLimit is the largest answer a client accepts: over UDP its EDNS UDP
// size, 512 bytes without EDNS and never less (RFC 6891 section 6.2.5);
// over a stream the 16-bit length prefix's maximum.
func answerLimit(proto string, edns bool, size uint16) int {
	if proto != ProtoUDP {
		return dns.MaxMsgSize
	}
	if !edns || size < dns.MinMsgSize {
		return dns.MinMsgSize
	}
	return int(size)
}

package query

import (
	"encoding/binary"
	"strings"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// ProtoUDP is the proto ServeDNS's callers pass for datagram listeners. Answers
// over UDP are held to the client's EDNS UDP size; every other proto is a
// stream and carries answers whole.
const ProtoUDP = "udp"

// request is one client query as the query path works on it. It lives in
// ServeDNS's pooled scratch and is reused for another query once ServeDNS
// returns: a zone client or the pool may read msg (and the query packed
// from it) only during the call it was passed to.
//
// While msg is handed to a zone or the pool it is theirs to read (packing
// a message rewrites its OPT's extended rcode bits). So the query path
// keeps the client's EDNS in the copies below, and afterwards only reads
// the question, which nobody writes.
type request struct {
	id     uint16
	opcode int
	rd, cd bool
	ad     bool // the client's AD bit: with do, whether an answer may keep AD (see keepsAD)

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

	// Memory behind msg for the common query (parseCommon): its question
	// section, its additional section and the OPT record in it.
	qbuf  [1]dns.Question
	extra [1]dns.RR
	opt   dns.OPT

	// raw is the client's query as it came, valid during ServeDNS only.
	raw []byte

	// reject is the rcode to refuse the query with (step 1 of the
	// resolution order), or dns.RcodeSuccess to resolve it.
	reject int

	// common is the client's query when parseCommon took it: msg packed is
	// these bytes but for the header's flags (see packTrimmed). Valid
	// during ServeDNS only.
	common []byte
}

// rebase points r at raw, a copy of the bytes it was parsed from: the
// listener's fast path parsed them in its own buffer, and a worker goes on
// with a copy.
func (r *request) rebase(raw []byte) {
	r.raw = raw
	if r.common != nil {
		r.common = raw
	}
}

// packTrimmed packs msg, the query as it is forwarded, into buf (or a
// fresh slice when it does not fit). A query parseCommon took is already
// in that form but for its flags: it is copied, not packed again.
func (r *request) packTrimmed(buf []byte) ([]byte, error) {
	if r.common == nil || len(r.common) > len(buf) {
		return r.msg.PackBuffer(buf)
	}
	b := buf[:copy(buf, r.common)]
	flags := binary.BigEndian.Uint16(b[2:])
	binary.BigEndian.PutUint16(b[2:], flags&(dnsmsg.FlagRD|dnsmsg.FlagCD)|dnsmsg.FlagAD) // what trim keeps: opcode QUERY, RD, CD; AD always
	if r.edns {
		// The OPT ends the query: its class is the UDP size, nxdnsd's
		// own, as parseCommon set it in msg; packing writes the
		// message's rcode, 0, into the extended rcode, the first byte
		// of its TTL.
		opt := len(b) - optLen
		binary.BigEndian.PutUint16(b[opt+3:], dnsmsg.EDNSSize)
		b[opt+5] = 0
	}
	return b, nil
}

// parse reads a raw client query into r, a zero request, and checks it
// against step 1 of the resolution order, the question's type included
// (see questionReject). It returns false when the query is to be dropped
// (shorter than a header, or a response). Otherwise reject is the rcode to
// refuse the query with, or dns.RcodeSuccess when the query may be
// resolved.
func parse(r *request, raw []byte, proto string) (ok bool, reject int) {
	if !r.header(raw, proto) {
		return false, 0
	}
	if r.parseCommon(raw, proto) {
		return true, questionReject(r.question[0].Qtype)
	}
	if reject = r.parseGeneral(raw, proto); reject != dns.RcodeSuccess {
		return true, reject
	}
	return true, questionReject(r.question[0].Qtype)
}

// header reads what parse takes from the header alone, and reports false
// for a query to drop.
func (r *request) header(raw []byte, proto string) bool {
	if len(raw) < dnsmsg.HeaderLen {
		return false
	}
	bits := binary.BigEndian.Uint16(raw[2:])
	if bits&dnsmsg.FlagQR != 0 {
		// Answering a response invites reflection loops between servers.
		return false
	}
	r.raw = raw
	r.id = binary.BigEndian.Uint16(raw)
	r.opcode = int(bits>>11) & 0xF
	r.rd = bits&dnsmsg.FlagRD != 0
	r.cd = bits&dnsmsg.FlagCD != 0
	r.ad = bits&dnsmsg.FlagAD != 0
	r.limit = answerLimit(proto, false, 0)
	return true
}

// parseGeneral is parse with miekg/dns's parser, for every query: it
// returns the rcode to refuse the query with, or dns.RcodeSuccess.
func (r *request) parseGeneral(raw []byte, proto string) (reject int) {
	m := &r.msg
	if err := m.Unpack(raw); err != nil || !countsMatch(raw, m) {
		*m = dns.Msg{}
		return dns.RcodeFormatError
	}

	opt, nopt := findOPT(m.Extra)
	if nopt > 1 {
		return dns.RcodeFormatError // RFC 6891 section 6.1.1
	}
	if opt != nil {
		r.edns, r.do = true, opt.Do()
		r.limit = answerLimit(proto, true, opt.UDPSize())
	}
	if m.Opcode != dns.OpcodeQuery {
		r.question = m.Question
		return dns.RcodeNotImplemented
	}
	if len(m.Question) != 1 {
		return dns.RcodeFormatError
	}
	r.question = m.Question
	if opt != nil && opt.Version() != 0 {
		return dns.RcodeBadVers // RFC 6891 section 6.1.3: we speak EDNS version 0 only
	}
	r.lname = strings.ToLower(m.Question[0].Name)
	trim(m, opt)
	return dns.RcodeSuccess
}

// parseCommon is parse's fast path for the queries nearly every client
// sends: one question whose name is letters, digits, hyphens and
// underscores, and at most an OPT record without options, version 0. It
// fills r exactly as the general path would, without miekg/dns's parser
// and its five allocations (the name is the only one left), and reports
// false, leaving r.msg untouched, for anything else.
func (r *request) parseCommon(raw []byte, proto string) bool {
	if r.opcode != dns.OpcodeQuery || binary.BigEndian.Uint16(raw[4:]) != 1 ||
		binary.BigEndian.Uint16(raw[6:]) != 0 || binary.BigEndian.Uint16(raw[8:]) != 0 {
		return false
	}
	arcount := binary.BigEndian.Uint16(raw[10:])
	if dnsmsg.QuestionLen(raw[dnsmsg.HeaderLen:]) == 0 {
		return false // a pointer, a long label, a long name, cut short: the general path decides
	}
	// The question is well formed: its labels are read without checks.
	var name [255]byte // the name in text form: at most 254 bytes and a dot
	n, upper := 0, false
	off := dnsmsg.HeaderLen
	for l := int(raw[off]); l != 0; l = int(raw[off]) {
		off++
		for _, c := range raw[off : off+l] {
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			case 'A' <= c && c <= 'Z':
				upper = true
			default:
				return false // needs escaping in text form
			}
		}
		n += copy(name[n:], raw[off:off+l])
		name[n] = '.'
		n++
		off += l
	}
	off++ // the root label
	if n == 0 {
		name[0], n = '.', 1
	}
	qtype, qclass := binary.BigEndian.Uint16(raw[off:]), binary.BigEndian.Uint16(raw[off+2:])
	off += 4
	switch {
	case arcount == 0 && off == len(raw):
	case arcount == 1 && off+optLen == len(raw) && raw[off] == 0 &&
		binary.BigEndian.Uint16(raw[off+1:]) == dns.TypeOPT && raw[off+6] == 0 &&
		binary.BigEndian.Uint16(raw[off+9:]) == 0:
		// An OPT without options (RDLENGTH 0), EDNS version 0 (the
		// TTL's second byte).
		o := &r.opt
		o.Hdr = dns.RR_Header{
			Name:   ".",
			Rrtype: dns.TypeOPT,
			Class:  binary.BigEndian.Uint16(raw[off+3:]),
			Ttl:    binary.BigEndian.Uint32(raw[off+5:]),
		}
		r.extra[0] = o
		r.msg.Extra = r.extra[:]
		r.edns, r.do = true, o.Do()
		r.limit = answerLimit(proto, true, o.UDPSize())
		o.SetUDPSize(dnsmsg.EDNSSize) // what upstreams are told (see trim)
	default:
		return false
	}
	qname := string(name[:n])
	r.lname = qname
	if upper {
		r.lname = strings.ToLower(qname)
	}
	r.qbuf[0] = dns.Question{Name: qname, Qtype: qtype, Qclass: qclass}
	r.question = r.qbuf[:]
	r.msg.Question = r.question
	// Field by field after a zeroing, not as a literal: the literal is
	// built on the stack of byte-wide stores and copied from there in
	// wider loads, which wait for those stores (perf: about half of
	// parseCommon's samples on the cache-hit path).
	h := &r.msg.MsgHdr
	*h = dns.MsgHdr{}
	h.Id = r.id
	h.Opcode = dns.OpcodeQuery
	h.RecursionDesired = r.rd
	h.AuthenticatedData = true // see trim
	h.CheckingDisabled = r.cd
	r.common = raw
	return true
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
// RD and CD bits, AD set, and the client's OPT record (DO bit and options),
// nothing else. AD is set whatever the client's (RFC 6840 5.7, spec
// section 10): a validating upstream then says whether the answer
// validated, so that one answer, cached under a key without AD, serves
// every client; keepsAD clears it for those that did not ask. Records a client put in other sections (a TSIG, say) mean
// nothing to an upstream. The OPT's UDP size becomes nxdnsd's own,
// dnsmsg.EDNSSize: it is hop-by-hop (RFC 6891 section 6.2.3), and the
// client's says what the client takes from nxdnsd, not what nxdnsd takes
// from an upstream. Passed on, a client's 4096 invites fragmented answers,
// and a TCP client's 512 costs it the additional records an upstream drops
// to fit.
func trim(m *dns.Msg, opt *dns.OPT) {
	m.MsgHdr = dns.MsgHdr{
		Id:                m.Id,
		Opcode:            dns.OpcodeQuery,
		RecursionDesired:  m.RecursionDesired,
		AuthenticatedData: true,
		CheckingDisabled:  m.CheckingDisabled,
	}
	m.Answer, m.Ns = nil, nil
	if opt == nil {
		m.Extra = nil
		return
	}
	opt.SetUDPSize(dnsmsg.EDNSSize)
	if len(m.Extra) != 1 {
		m.Extra = []dns.RR{opt}
	}
}

// keepsAD reports whether an answer from a resolver or the cache may keep
// the AD bit the upstream set: only when the client set AD or DO (RFC 6840
// 5.7 and 5.8, spec section 10). Answers built here never set it.
func (r *request) keepsAD() bool { return r.ad || r.do }

// answerLimit is the largest answer nxdnsd sends a client: over UDP its
// EDNS UDP size up to dnsmsg.EDNSSize (spec section 3, DNS Flag Day 2020: no
// fragmented answers, and a 1232-byte cap on what a spoofed query can
// reflect), 512 bytes without EDNS and never less (RFC 6891 section
// 6.2.5); over a stream the 16-bit length prefix's maximum.
func answerLimit(proto string, edns bool, size uint16) int {
	if proto != ProtoUDP {
		return dns.MaxMsgSize
	}
	if !edns || size < dns.MinMsgSize {
		return dns.MinMsgSize
	}
	return min(int(size), dnsmsg.EDNSSize)
}

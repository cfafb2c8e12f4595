package query

import "github.com/miekg/dns"

// ednsUDPSize is the UDP payload size nxdnsd advertises in its OPT records:
// the DNS Flag Day 2020 value, which avoids IP fragmentation on every common
// path.
const ednsUDPSize = 1232

// reply starts an answer built here: the client's ID, opcode, RD and CD bits
// and question, RA set (recursion is what nxdnsd offers its clients), and an
// OPT record when the query had one (RFC 6891 section 7), with the query's
// DO bit (RFC 3225).
func (r *request) reply(rcode int) *dns.Msg {
	m := &dns.Msg{
		MsgHdr: dns.MsgHdr{
			Id:                 r.id,
			Response:           true,
			Opcode:             r.opcode,
			RecursionDesired:   r.rd,
			CheckingDisabled:   r.cd,
			RecursionAvailable: true,
			Rcode:              rcode,
		},
		Question: r.question,
	}
	if r.edns {
		m.Extra = []dns.RR{newOPT(r.do)}
	}
	return m
}

// authoritative starts an answer for a name nxdnsd owns (special-use names,
// local records): the AA bit set, rcode as given.
func (r *request) authoritative(rcode int) *dns.Msg {
	m := r.reply(rcode)
	m.Authoritative = true
	return m
}

func newOPT(do bool) *dns.OPT {
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(ednsUDPSize)
	if do {
		o.SetDo()
	}
	return o
}

// adopt makes an answer that came from a zone resolver or the pool the
// client's, leaving its content (rcode, flags, records, DNSSEC data, the
// OPT's DO bit and options) as it was. Only the OPT's UDP size changes: it
// is hop-by-hop (RFC 6891 section 6.2.3) and must state what nxdnsd accepts,
// not what the upstream does. A client without EDNS gets no OPT, unless the
// rcode needs its extended bits; a client with EDNS gets one even from an
// upstream that sent none.
func (r *request) adopt(m *dns.Msg) {
	opt, _ := findOPT(m.Extra)
	switch {
	case opt != nil && r.edns:
		opt.SetUDPSize(ednsUDPSize)
	case opt != nil && m.Rcode <= 0xF:
		m.Extra = dropOPT(m.Extra)
	case opt == nil && r.edns:
		m.Extra = append(m.Extra, newOPT(r.do))
	}
}

// dropOPT removes every OPT record from extra, in place.
func dropOPT(extra []dns.RR) []dns.RR {
	kept := extra[:0]
	for _, rr := range extra {
		if _, ok := rr.(*dns.OPT); !ok {
			kept = append(kept, rr)
		}
	}
	clear(extra[len(kept):])
	return kept
}

// pack encodes m as the answer to r: with the client's ID and question (the
// question as the client wrote it, whatever an upstream echoed) and at most
// r.limit bytes. An answer too large for the client's UDP size is truncated
// with TC set, the OPT record kept, so the client retries over TCP.
func (r *request) pack(m *dns.Msg) ([]byte, error) {
	m.Id = r.id
	m.Response = true
	m.Question = r.question
	m.Compress = true
	b, err := m.Pack()
	if err != nil || len(b) <= r.limit {
		return b, err
	}
	m.Truncate(r.limit)
	if b, err = m.Pack(); err != nil || len(b) <= r.limit {
		return b, err
	}
	// Truncate keeps the OPT record whatever its size; only an upstream's
	// OPT stuffed with options larger than the limit gets here. The header
	// and question always fit in 512 bytes.
	m.Answer, m.Ns, m.Extra = nil, nil, nil
	m.Rcode &= 0xF
	m.Truncated = true
	return m.Pack()
}

package query

import (
	"fmt"
	"reflect"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

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
	o.SetUDPSize(dnsmsg.EDNSSize)
	if do {
		o.SetDo()
	}
	return o
}

// adopt makes an answer that came from a zone resolver or the pool the
// client's, leaving its content (rcode, flags, records, DNSSEC data, the
// OPT's DO bit and options) as it was, but for AD, which a client that
// set neither AD nor DO does not get (keepsAD), and the OPT's UDP size: it
// is hop-by-hop (RFC 6891 section 6.2.3) and must state what nxdnsd
// accepts, not what the upstream does. A client without EDNS gets no OPT, unless the
// rcode needs its extended bits; a client with EDNS gets one even from an
// upstream that sent none.
func (r *request) adopt(m *dns.Msg) {
	r.recheck = mayBeLenient(m)
	m.AuthenticatedData = m.AuthenticatedData && r.keepsAD()
	opt, _ := findOPT(m.Extra)
	switch {
	case opt != nil && r.edns:
		opt.SetUDPSize(dnsmsg.EDNSSize)
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

// mayBeLenient reports whether miekg/dns may have parsed a record of m, an
// answer from a zone resolver or an upstream, leniently: when a record's
// RDATA ends early it leaves the missing fields zero instead of failing,
// and packed again such a record can make bytes no client can parse (an
// SOA with RDLENGTH 0, an NSEC3 cut after its salt length). A missing field
// makes a record longer packed than it came, uncompressed; so does a name
// that came compressed, which is then checked as well. Records built in
// code (RDLENGTH 0, fields set) are never suspect.
func mayBeLenient(m *dns.Msg) bool {
	for _, section := range [...][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range section {
			h := rr.Header()
			rdata := dns.Len(rr) - dns.Len(h)
			if h.Rdlength == 0 && rdata > 0 && unset(rr) || h.Rdlength > 0 && rdata > int(h.Rdlength) {
				return true
			}
		}
	}
	return false
}

// unset reports whether rr's RDATA fields all have their zero value, as
// miekg/dns leaves them for RDLENGTH 0. A record built in code has RDLENGTH
// 0 too, until packed, but its fields set: the first one decides.
func unset(rr dns.RR) bool { return zeroButHeader(reflect.ValueOf(rr).Elem()) }

// zeroButHeader reports whether every field of the struct v but its
// RR_Header has its zero value, looking into embedded structs (an HTTPS
// record is an SVCB, a CDS a DS).
func zeroButHeader(v reflect.Value) bool {
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Type() == headerType:
		case v.Type().Field(i).Anonymous && f.Kind() == reflect.Struct:
			if !zeroButHeader(f) {
				return false
			}
		case !f.IsZero():
			return false
		}
	}
	return true
}

var headerType = reflect.TypeFor[dns.RR_Header]()

// pack encodes m as the answer to r: with the client's ID and question (the
// question as the client wrote it, whatever an upstream echoed) and at most
// r.limit bytes. An answer too large for the client's UDP size loses
// records from its end, additional ones first, the OPT record kept; TC is
// set, so that the client retries over TCP, only when an answer or
// authority record had to go (RFC 2181 section 9: additional data that
// does not fit is dropped without it).
//
// An answer adopted from a zone resolver or the pool that holds a record
// miekg/dns may have parsed leniently (see mayBeLenient) is parsed back
// before it goes. If it does not parse, that is an error, which ServeDNS turns
// into a SERVFAIL.
func (r *request) pack(m *dns.Msg) ([]byte, error) {
	b, err := r.fit(m)
	if err == nil && r.recheck {
		if uerr := new(dns.Msg).Unpack(b); uerr != nil {
			return nil, fmt.Errorf("query: the answer does not parse once packed: %w", uerr)
		}
	}
	return b, err
}

// fit is pack without the check.
func (r *request) fit(m *dns.Msg) ([]byte, error) {
	m.Id = r.id
	m.Response = true
	m.Question = r.question
	m.Compress = true
	b, err := m.Pack()
	if err != nil || len(b) <= r.limit {
		return b, err
	}
	// An Extended DNS Error goes before anything else does (spec section 3).
	if dropEDE(m) {
		if b, err = m.Pack(); err != nil || len(b) <= r.limit {
			return b, err
		}
	}
	// Truncate sets TC for any record left out, additional ones too;
	// only the upstream's own TC and a lost answer or authority record
	// count.
	tc, answers, authority := m.Truncated, len(m.Answer), len(m.Ns)
	m.Truncate(r.limit)
	m.Truncated = tc || len(m.Answer) < answers || len(m.Ns) < authority
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

package query

import (
	"fmt"

	"github.com/miekg/dns"
)

// Record is one local record, ready to answer with: a *dns.A, *dns.AAAA,
// *dns.CNAME, *dns.TXT or *dns.PTR of class IN whose owner (and CNAME or
// PTR target) is a lower-case fully qualified name. The configuration's
// validation builds them (config.LocalRecord.RR), having checked their
// values and that a name with a CNAME has no other record; the table takes
// them as they are and checks none of that again.
type Record = dns.RR

// maxCNAMEChain bounds how many local CNAMEs one answer follows. Real
// chains are one or two long; the bound only stops a misconfigured loop.
const maxCNAMEChain = 8

// localTable holds the local records by owner name. It is never modified
// after newLocalTable, and answers share its records: nothing on the answer
// path (packing, truncation) modifies a record.
type localTable map[string]*localName

// localName is every record of one name.
type localName struct {
	rrs   []dns.RR   // in configuration order
	cname *dns.CNAME // the name's CNAME, or nil; then it is the only record
}

// newLocalTable indexes recs by owner. It refuses only a record it cannot
// hold: nil, or of a type other than the five local record types.
func newLocalTable(recs []Record) (localTable, error) {
	t := make(localTable, len(recs))
	for i, rr := range recs {
		switch rr.(type) {
		case *dns.A, *dns.AAAA, *dns.CNAME, *dns.TXT, *dns.PTR:
		default:
			return nil, fmt.Errorf("%w %d: %T is not a local record type (A, AAAA, CNAME, TXT, PTR)", ErrBadRecord, i, rr)
		}
		name := rr.Header().Name
		n := t[name]
		if n == nil {
			n = &localName{}
			t[name] = n
		}
		if c, ok := rr.(*dns.CNAME); ok {
			n.cname = c
		}
		n.rrs = append(n.rrs, rr)
	}
	return t, nil
}

// answer answers r from the local records when its name is one of them, and
// returns nil otherwise. It gives the records of the asked type (all of
// them for ANY), NODATA when the name has none of that type, and for a name
// with a CNAME the CNAME, followed while its target is local too. A CNAME
// leading out of the local records ends the answer: the client's resolver
// follows it.
func (t localTable) answer(r *request) *dns.Msg {
	n := t[r.lname]
	if n == nil {
		return nil
	}
	m := r.authoritative(dns.RcodeSuccess)
	q := r.question[0]
	if !inClass(q.Qclass) {
		return m
	}
	for range maxCNAMEChain {
		if n.cname == nil || q.Qtype == dns.TypeCNAME || q.Qtype == dns.TypeANY {
			for _, rr := range n.rrs {
				if q.Qtype == dns.TypeANY || rr.Header().Rrtype == q.Qtype {
					m.Answer = append(m.Answer, rr)
				}
			}
			return m
		}
		m.Answer = append(m.Answer, n.cname)
		if n = t[n.cname.Target]; n == nil || chained(m.Answer, n) {
			return m
		}
	}
	return m
}

// chained reports whether n's CNAME is already in answer: the chain loops.
func chained(answer []dns.RR, n *localName) bool {
	for _, rr := range answer {
		if rr == dns.RR(n.cname) {
			return true
		}
	}
	return false
}

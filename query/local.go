package query

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// Record is one configured local record (the local_records table).
type Record struct {
	// Name is the record's owner; it is matched exactly, without regard to
	// case.
	Name string

	// Type is dns.TypeA, TypeAAAA, TypeCNAME, TypeTXT or TypePTR.
	Type uint16

	// Value is the record's data in the form the configuration has it: an
	// IPv4 address (A), an IPv6 address (AAAA), a domain name (CNAME, PTR) or
	// the text itself (TXT; split into 255-byte strings when longer).
	Value string

	TTL uint32
}

// maxCNAMEChain bounds how many local CNAMEs one answer follows. Real
// chains are one or two long; the bound only stops a misconfigured loop.
const maxCNAMEChain = 8

// localTable holds the local records by lower-case name. It is never
// modified after newLocalTable, and answers share its records: nothing on
// the answer path (packing, truncation) modifies a record.
type localTable map[string]*localName

// localName is every record of one name.
type localName struct {
	rrs   []dns.RR   // in configuration order
	cname *dns.CNAME // the name's CNAME, or nil; then it is the only record
}

func newLocalTable(recs []Record) (localTable, error) {
	t := make(localTable, len(recs))
	for i, rec := range recs {
		rr, err := newLocalRR(rec)
		if err != nil {
			return nil, fmt.Errorf("%w %d: %v", ErrBadRecord, i, err)
		}
		name := rr.Header().Name
		n := t[name]
		if n == nil {
			n = &localName{}
			t[name] = n
		}
		if n.cname != nil || (rec.Type == dns.TypeCNAME && len(n.rrs) > 0) {
			// RFC 1034 section 3.6.2: a CNAME is the only record of its name.
			return nil, fmt.Errorf("%w %d: %s has a CNAME and other records", ErrBadRecord, i, name)
		}
		if c, ok := rr.(*dns.CNAME); ok {
			n.cname = c
		}
		n.rrs = append(n.rrs, rr)
	}
	return t, nil
}

// newLocalRR builds the resource record of one configured record.
func newLocalRR(rec Record) (dns.RR, error) {
	name, err := canonicalName(rec.Name)
	if err != nil {
		return nil, err
	}
	hdr := dns.RR_Header{Name: name, Rrtype: rec.Type, Class: dns.ClassINET, Ttl: rec.TTL}
	switch rec.Type {
	case dns.TypeA:
		a, err := netip.ParseAddr(rec.Value)
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("%s: %q is not an IPv4 address", name, rec.Value)
		}
		return &dns.A{Hdr: hdr, A: net.IP(a.AsSlice())}, nil
	case dns.TypeAAAA:
		a, err := netip.ParseAddr(rec.Value)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return nil, fmt.Errorf("%s: %q is not an IPv6 address", name, rec.Value)
		}
		return &dns.AAAA{Hdr: hdr, AAAA: net.IP(a.AsSlice())}, nil
	case dns.TypeCNAME, dns.TypePTR:
		target, err := canonicalName(rec.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if rec.Type == dns.TypeCNAME {
			return &dns.CNAME{Hdr: hdr, Target: target}, nil
		}
		return &dns.PTR{Hdr: hdr, Ptr: target}, nil
	case dns.TypeTXT:
		return &dns.TXT{Hdr: hdr, Txt: txtStrings(rec.Value)}, nil
	}
	return nil, fmt.Errorf("%s: type %s is not supported in local records", name, dns.Type(rec.Type))
}

// txtStrings splits text into the character-strings of a TXT record (at
// most 255 bytes each) in the form dns.TXT packs: backslashes escaped, so
// that the text goes on the wire byte for byte.
func txtStrings(text string) []string {
	var out []string
	for {
		n := min(len(text), 255)
		out = append(out, strings.ReplaceAll(text[:n], `\`, `\\`))
		text = text[n:]
		if text == "" {
			return out
		}
	}
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

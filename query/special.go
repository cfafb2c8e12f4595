package query

import (
	"net"
	"strings"

	"github.com/miekg/dns"
)

// The special-use names (RFC 6761) nxdnsd answers itself, whatever the
// configuration, so that they never leak to an upstream.
const (
	localhostZone = "localhost."
	invalidZone   = "invalid."
	loopbackPTR4  = "1.0.0.127.in-addr.arpa."
	loopbackPTR6  = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa."
)

// specialTTL is the TTL of every special-use answer, negative ones included
// through the SOA: Unbound's for its built-in localhost zone. The data never
// changes, so any long value would do.
const specialTTL = 10800

var (
	loopback4 = net.IPv4(127, 0, 0, 1).To4()
	loopback6 = net.IPv6loopback
)

// special answers r when its name is a special-use name, and returns nil
// otherwise: localhost. and names below it have A 127.0.0.1 and AAAA ::1,
// invalid. and names below it do not exist, and the two loopback reverse
// names have PTR localhost. Questions for other types get NODATA; negative
// answers carry the SOA of the special zone so that they can be cached.
func (r *request) special() *dns.Msg {
	q := r.question[0]
	switch r.lname {
	case loopbackPTR4, loopbackPTR6:
		m := r.authoritative(dns.RcodeSuccess)
		if inClass(q.Qclass) && (q.Qtype == dns.TypePTR || q.Qtype == dns.TypeANY) {
			m.Answer = []dns.RR{&dns.PTR{Hdr: specialHeader(q.Name, dns.TypePTR), Ptr: localhostZone}}
		} else {
			m.Ns = []dns.RR{specialSOA(r.lname)}
		}
		return m
	}

	// Most names end in neither zone: the suffix decides them without a
	// walk of their labels (which an escaped dot would need).
	if !strings.HasSuffix(r.lname, localhostZone) && !strings.HasSuffix(r.lname, invalidZone) {
		return nil
	}
	switch lastLabel(r.lname) {
	case localhostZone:
		m := r.authoritative(dns.RcodeSuccess)
		if inClass(q.Qclass) {
			if q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY {
				m.Answer = append(m.Answer, &dns.A{Hdr: specialHeader(q.Name, dns.TypeA), A: loopback4})
			}
			if q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY {
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: specialHeader(q.Name, dns.TypeAAAA), AAAA: loopback6})
			}
		}
		if len(m.Answer) == 0 {
			m.Ns = []dns.RR{specialSOA(localhostZone)}
		}
		return m
	case invalidZone:
		m := r.authoritative(dns.RcodeNameError)
		m.Ns = []dns.RR{specialSOA(invalidZone)}
		return m
	}
	return nil
}

// specialHeader is the header of an answer record: owned by the name as
// the client wrote it, like the question.
func specialHeader(owner string, rrtype uint16) dns.RR_Header {
	return dns.RR_Header{Name: owner, Rrtype: rrtype, Class: dns.ClassINET, Ttl: specialTTL}
}

// specialSOA is the SOA of a special zone, the one Unbound serves for
// localhost.
func specialSOA(zone string) *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: specialTTL},
		Ns:      localhostZone,
		Mbox:    "nobody.invalid.",
		Serial:  1,
		Refresh: 3600,
		Retry:   1200,
		Expire:  604800,
		Minttl:  specialTTL,
	}
}

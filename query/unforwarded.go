package query

import "github.com/miekg/dns"

// Questions nxdnsd neither answers nor forwards.
//
// RFC 6895 section 3.1 reserves types 128 to 255 for meta-types and
// QTYPEs, and names OPT (41) a meta-type too. Of those, ANY is a question
// like any other and is forwarded; the others are decided here:
//
//   - OPT, TSIG and the unassigned meta-types 128 to 248 exist only inside
//     one message (RFC 6891 section 6.1.1, RFC 8945): asking for them makes
//     no sense, so the query is malformed, FORMERR (step 1 of the
//     resolution order), as BIND and Unbound answer.
//   - TKEY (key negotiation, RFC 2930), MAILA and MAILB (obsolete QTYPEs,
//     RFC 1035 section 3.2.3) are real questions that nxdnsd does not
//     implement: NOTIMP, as BIND answers MAILA and MAILB.
//   - AXFR and IXFR are zone transfers, which nxdnsd does not forward:
//     REFUSED (see unforwarded).

// questionReject is the rcode that step 1 of the resolution order answers
// a question of type qtype with, or dns.RcodeSuccess when it may be
// resolved.
func questionReject(qtype uint16) int {
	switch qtype {
	case dns.TypeOPT, dns.TypeTSIG:
		return dns.RcodeFormatError
	case dns.TypeTKEY, dns.TypeMAILA, dns.TypeMAILB:
		return dns.RcodeNotImplemented
	}
	if qtype >= 128 && qtype <= 248 {
		return dns.RcodeFormatError
	}
	return dns.RcodeSuccess
}

// unforwarded answers, after the names nxdnsd owns have had their say, the
// queries that must never reach an upstream: REFUSED, with an Extended DNS
// Error 21 (Not Supported) saying why, for a zone transfer (AXFR, IXFR) and
// for any class but IN. It returns nil for a query that may be forwarded.
//
// CHAOS queries such as version.bind, hostname.bind and id.server are
// refused like the rest, not answered with an empty TXT: nxdnsd has no
// version or identity to publish to whoever asks, REFUSED says so plainly
// (an empty NOERROR would claim the name exists), and it is what Unbound
// answers with hide-version and hide-identity set. A special-use name or a local record asked in another
// class still gets the answer it always had (no data there), since that
// answer is nxdnsd's own.
func (r *request) unforwarded() *dns.Msg {
	q := r.question[0]
	switch {
	case q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR:
		return withEDE(r.reply(dns.RcodeRefused), edeNotSupported, "zone transfers are not forwarded")
	case q.Qclass != dns.ClassINET:
		return withEDE(r.reply(dns.RcodeRefused), edeNotSupported, "only class IN is forwarded")
	}
	return nil
}

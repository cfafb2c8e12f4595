// Package dnstext names DNS codes the way nxdnsd's query log and metrics
// spell them, so that a log line's "rcode" and a metric's rcode label can
// never disagree.
package dnstext

import (
	"strconv"

	"github.com/miekg/dns"
)

// rcodeBadVers is extended rcode 16 in a message header. miekg/dns names
// 16 "BADSIG", its meaning in a TSIG record; in a header (RFC 6891) it is
// BADVERS, the only one a DNS answer can carry.
const rcodeBadVers = 16

// Rcode returns the mnemonic of a header rcode, extended bits included
// ("NOERROR", "SERVFAIL", "BADVERS"), or "RCODE" and the number for one
// without a name. Named rcodes allocate nothing.
func Rcode(rcode int) string {
	if rcode == rcodeBadVers {
		return "BADVERS"
	}
	if s, ok := dns.RcodeToString[rcode]; ok {
		return s
	}
	return "RCODE" + strconv.Itoa(rcode)
}

// Type returns the mnemonic of a query type ("A", "AAAA"), or the RFC 3597
// generic form ("TYPE65280") for one without a name. Named types allocate
// nothing.
func Type(t uint16) string {
	if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return "TYPE" + strconv.Itoa(int(t))
}

// Class returns the mnemonic of a class ("IN", "CH", "ANY"), or the RFC
// 3597 generic form ("CLASS42") for one without a name. Named classes
// allocate nothing.
func Class(c uint16) string {
	if s, ok := dns.ClassToString[c]; ok {
		return s
	}
	return "CLASS" + strconv.Itoa(int(c))
}

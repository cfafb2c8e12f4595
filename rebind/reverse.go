package rebind

import (
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// The SOA record of a private reverse zone, as RFC 6303 section 3 gives
// it: "@ 10800 IN SOA @ nobody.invalid. 1 3600 1200 604800 10800", with
// the NS record "@ 10800 IN NS @".
const (
	reverseTTL     = 10800
	reverseRName   = "nobody.invalid."
	reverseSerial  = 1
	reverseRefresh = 3600
	reverseRetry   = 1200
	reverseExpire  = 604800
	reverseMinimum = 10800
)

// PrivateReverseZones are the zones whose names never reach a public
// resolver (spec section 15): every zone of RFC 6303 section 4 and RFC
// 7793's 64.100.in-addr.arpa. to 127.100.in-addr.arpa. (100.64.0.0/10,
// CGNAT), lower-case and fully qualified. No zone lies below another.
var PrivateReverseZones = privateReverseZones()

func privateReverseZones() []string {
	zones := []string{
		// RFC 6303 4.1, RFC 1918.
		"10.in-addr.arpa.",
	}
	for i := 16; i <= 31; i++ {
		zones = append(zones, strconv.Itoa(i)+".172.in-addr.arpa.")
	}
	zones = append(zones, "168.192.in-addr.arpa.",
		// RFC 6303 4.2, RFC 5735: this network, loopback, link-local,
		// the three documentation networks, the broadcast address.
		"0.in-addr.arpa.", "127.in-addr.arpa.", "254.169.in-addr.arpa.",
		"2.0.192.in-addr.arpa.", "100.51.198.in-addr.arpa.", "113.0.203.in-addr.arpa.",
		"255.255.255.255.in-addr.arpa.",
		// RFC 6303 4.3, RFC 4291: the unspecified address and loopback.
		strings.Repeat("0.", 32)+"ip6.arpa.",
		"1."+strings.Repeat("0.", 31)+"ip6.arpa.",
		// RFC 6303 4.4, RFC 4193: locally assigned unique local addresses.
		"d.f.ip6.arpa.",
		// RFC 6303 4.5, RFC 4291: link-local fe80::/10.
		"8.e.f.ip6.arpa.", "9.e.f.ip6.arpa.", "a.e.f.ip6.arpa.", "b.e.f.ip6.arpa.",
		// RFC 6303 4.6, RFC 3849: the documentation prefix 2001:db8::/32.
		"8.b.d.0.1.0.0.2.ip6.arpa.",
	)
	// RFC 7793: the CGNAT range 100.64.0.0/10.
	for i := 64; i <= 127; i++ {
		zones = append(zones, strconv.Itoa(i)+".100.in-addr.arpa.")
	}
	return zones
}

// reverseIndex is PrivateReverseZones as a set, for PrivateReverseZone.
var reverseIndex = func() map[string]string {
	m := make(map[string]string, len(PrivateReverseZones))
	for _, z := range PrivateReverseZones {
		m[z] = z
	}
	return m
}()

// maxReverseZone is the length of the longest of PrivateReverseZones: no
// suffix longer than this can be one.
var maxReverseZone = func() int {
	n := 0
	for _, z := range PrivateReverseZones {
		n = max(n, len(z))
	}
	return n
}()

// PrivateReverseZone reports whether qname, fully qualified in
// presentation format, is one of PrivateReverseZones or lies below one,
// ASCII case aside, and which. It allocates nothing.
//
// The query path asks it after the forward zones (spec section 3, step
// 6): a name that no forward zone covers and that this matches goes to a
// pool upstream whose address is a RouterAddress, when the pool has one,
// and is otherwise answered by ReverseAnswer, with source "special".
func PrivateReverseZone(qname string) (zone string, ok bool) {
	if !under(qname, "in-addr.arpa.") && !under(qname, "ip6.arpa.") {
		return "", false
	}
	// The zones are lower case; the suffix is compared in a lower-case
	// copy on the stack (a map index of string(bytes) does not allocate).
	var buf [256]byte
	n := len(qname)
	if n > len(buf) {
		return "", false
	}
	for i := range n {
		buf[i] = lower(qname[i])
	}
	name := buf[:n]
	// Every suffix that starts a label, longest first, as long as it
	// could be a zone.
	for i := 0; i < n; i++ {
		if (i == 0 || name[i-1] == '.') && n-i <= maxReverseZone {
			if z, ok := reverseIndex[string(name[i:])]; ok {
				return z, true
			}
		}
		if name[i] == '\\' {
			i++ // an escaped byte is no label boundary
		}
	}
	return "", false
}

// ReverseSOA is zone's SOA record as RFC 6303 section 3 gives it.
func ReverseSOA(zone string) *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: reverseTTL},
		Ns:      zone,
		Mbox:    reverseRName,
		Serial:  reverseSerial,
		Refresh: reverseRefresh,
		Retry:   reverseRetry,
		Expire:  reverseExpire,
		Minttl:  reverseMinimum,
	}
}

// reverseNS is zone's NS record as RFC 6303 section 3 gives it.
func reverseNS(zone string) *dns.NS {
	return &dns.NS{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: reverseTTL}, Ns: zone}
}

// ReverseAnswer fills m, a reply to a query for a name in zone (as
// PrivateReverseZone found it), as the empty zone of RFC 6303 answers:
// below the zone, NXDOMAIN with the zone's SOA in the authority section;
// at the zone itself, its SOA or NS record when asked for (both for ANY),
// else NODATA with the SOA. m is authoritative and never carries AD. Its
// question, ID and OPT record are the caller's.
func ReverseAnswer(m *dns.Msg, zone string) {
	m.Authoritative = true
	m.AuthenticatedData = false
	m.Answer, m.Ns = nil, nil
	m.Rcode = dns.RcodeNameError
	if len(m.Question) != 1 || !strings.EqualFold(m.Question[0].Name, zone) {
		m.Ns = []dns.RR{ReverseSOA(zone)}
		return
	}
	m.Rcode = dns.RcodeSuccess
	switch m.Question[0].Qtype {
	case dns.TypeSOA:
		m.Answer = []dns.RR{ReverseSOA(zone)}
	case dns.TypeNS:
		m.Answer = []dns.RR{reverseNS(zone)}
	case dns.TypeANY:
		m.Answer = []dns.RR{ReverseSOA(zone), reverseNS(zone)}
	default:
		m.Ns = []dns.RR{ReverseSOA(zone)}
	}
}

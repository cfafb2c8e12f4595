// Package rebind is nxdnsd's rebinding protection and its private reverse
// names (spec section 15), as pure functions over answers: no state but
// the configuration, no goroutine, no I/O.
//
// A Filter strips private addresses (see Private) from the answers the
// pool gives for public names, so that a page on the Internet cannot make
// a browser talk to the home network under the page's own name (DNS
// rebinding). PrivateReverseZone and ReverseAnswer keep the reverse names
// of private addresses (RFC 6303, RFC 7793) off public resolvers.
package rebind

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// What an answer that lost records says about it, in an Extended DNS Error
// (RFC 8914, spec section 15). The query path adds it, as it adds every
// EDE, only for a client that sent EDNS.
const (
	EDECode = dns.ExtendedErrorCodeBlocked // 15
	EDEText = "rebinding protection"
)

// maxChain bounds how far a CNAME chain is followed in one answer when
// looking for a name under rebind_allow; real chains are a handful long,
// and a loop ends here.
const maxChain = 16

// Filter is rebinding protection with one configuration: the names under
// rebind_allow. A nil *Filter is protection off: it strips nothing. A
// Filter never changes; a reload makes a new one. It is safe for
// concurrent use.
type Filter struct {
	allow []string // lower-case, fully qualified
}

// New returns the filter of server.rebind_protection (enabled) and
// server.rebind_allow (allow, names as written or canonical), or nil when
// protection is off.
func New(enabled bool, allow []string) *Filter {
	if !enabled {
		return nil
	}
	return &Filter{allow: canonicalZones(allow)}
}

// Strip applies the protection to raw, a whole answer from the pool to a
// query of one question. It returns nil, nil when raw goes to the client
// as it is: it holds no private address, or its name is exempt (a local
// name, or one under rebind_allow, itself or in its CNAME chain), or f is
// nil. Otherwise it returns the answer parsed, with the private addresses
// removed as StripMsg removes them: the caller adds the EDE (EDECode,
// EDEText), packs it and counts it in nxdns_rebind_stripped_total.
//
// The common answer costs one allocation-free walk of its bytes (scan);
// only an answer that carries a private address is parsed. An error means
// raw carried something that looked private but could not be parsed; the
// query path, which has parsed or vouched for every answer it passes here,
// never sees one, and should answer SERVFAIL rather than pass raw on.
func (f *Filter) Strip(raw []byte) (*dns.Msg, error) {
	if f == nil {
		return nil, nil
	}
	found, walked := scan(raw)
	if walked && !found {
		return nil, nil
	}
	// A name of the home network is decided on the bytes: a router in
	// the pool answers those with private addresses all day long.
	var buf [256]byte
	if q, ok := wireQName(raw, &buf); ok && (localName(q) || f.allowed(q)) {
		return nil, nil
	}
	m := new(dns.Msg)
	if err := m.Unpack(raw); err != nil {
		return nil, fmt.Errorf("rebinding protection: parsing the answer: %w", err)
	}
	if !f.StripMsg(m) {
		return nil, nil
	}
	return m, nil
}

// Public reports whether raw, a whole answer, holds no private address
// at all, whatever the configuration: then Strip returns nil, nil for it
// under every Filter. It is Strip's first walk of the bytes alone, for a
// caller that keeps the verdict beside bytes that do not change (the
// cache's entries).
func Public(raw []byte) bool {
	found, walked := scan(raw)
	return walked && !found
}

// StripMsg is Strip for an answer already parsed, changed in place. It
// reports whether anything was removed: every A and AAAA record whose
// address is private (IPv4-mapped addresses judged as IPv4), in any
// section; every private ipv4hint and ipv6hint value of an HTTPS or SVCB
// record (a hint left empty goes whole, the record stays); and every
// RRSIG covering an RRset that lost a record or a hint, since it no
// longer verifies. A stripped answer loses its AD bit (spec section 10).
// When nothing is left of the answer section's addresses the answer is
// NODATA: the rcode stays NOERROR, and the CNAMEs and other records stay.
// Nothing is removed when the question's name is exempt: a single label,
// under LocalZones, or, itself or a name of its CNAME chain in the
// answer, under rebind_allow.
func (f *Filter) StripMsg(m *dns.Msg) bool {
	if f == nil || len(m.Question) != 1 || !hasPrivate(m) {
		return false
	}
	qname := m.Question[0].Name
	if localName(qname) || f.chainAllowed(qname, m.Answer) {
		return false
	}
	cut := make(map[rrset]bool)
	m.Answer = strip(m.Answer, cut)
	m.Ns = strip(m.Ns, cut)
	m.Extra = strip(m.Extra, cut)
	if len(cut) == 0 {
		return false
	}
	m.Answer = dropSigs(m.Answer, cut)
	m.Ns = dropSigs(m.Ns, cut)
	m.Extra = dropSigs(m.Extra, cut)
	m.AuthenticatedData = false
	return true
}

// allowed reports whether name is under rebind_allow.
func (f *Filter) allowed(name []byte) bool {
	for _, z := range f.allow {
		if under(name, z) {
			return true
		}
	}
	return false
}

// chainAllowed reports whether qname, or a name its CNAME chain in answer
// leads to, is under rebind_allow.
func (f *Filter) chainAllowed(qname string, answer []dns.RR) bool {
	name := qname
	for range maxChain {
		for _, z := range f.allow {
			if under(name, z) {
				return true
			}
		}
		next := ""
		for _, rr := range answer {
			if c, ok := rr.(*dns.CNAME); ok && strings.EqualFold(c.Hdr.Name, name) {
				next = c.Target
				break
			}
		}
		if next == "" {
			return false
		}
		name = next
	}
	return false
}

// rrset names an RRset: its owner, lower case, and type.
type rrset struct {
	owner string
	typ   uint16
}

func setOf(h *dns.RR_Header) rrset { return rrset{strings.ToLower(h.Name), h.Rrtype} }

// hasPrivate reports whether m holds an address that strip would remove.
func hasPrivate(m *dns.Msg) bool {
	for _, sec := range [...][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			switch rr := rr.(type) {
			case *dns.A:
				if privateIP(rr.A) {
					return true
				}
			case *dns.AAAA:
				if privateIP(rr.AAAA) {
					return true
				}
			case *dns.HTTPS:
				if privateHints(rr.Value) {
					return true
				}
			case *dns.SVCB:
				if privateHints(rr.Value) {
					return true
				}
			}
		}
	}
	return false
}

// strip returns rrs without their private addresses, in place, adding the
// RRsets it changed to cut.
func strip(rrs []dns.RR, cut map[rrset]bool) []dns.RR {
	kept := rrs[:0]
	for _, rr := range rrs {
		switch r := rr.(type) {
		case *dns.A:
			if privateIP(r.A) {
				cut[setOf(&r.Hdr)] = true
				continue
			}
		case *dns.AAAA:
			if privateIP(r.AAAA) {
				cut[setOf(&r.Hdr)] = true
				continue
			}
		case *dns.HTTPS:
			if v, changed := stripHints(r.Value); changed {
				r.Value = v
				cut[setOf(&r.Hdr)] = true
			}
		case *dns.SVCB:
			if v, changed := stripHints(r.Value); changed {
				r.Value = v
				cut[setOf(&r.Hdr)] = true
			}
		}
		kept = append(kept, rr)
	}
	clear(rrs[len(kept):])
	return kept
}

// dropSigs returns rrs without the RRSIGs that cover an RRset of cut.
func dropSigs(rrs []dns.RR, cut map[rrset]bool) []dns.RR {
	kept := rrs[:0]
	for _, rr := range rrs {
		if sig, ok := rr.(*dns.RRSIG); ok && cut[rrset{strings.ToLower(sig.Hdr.Name), sig.TypeCovered}] {
			continue
		}
		kept = append(kept, rr)
	}
	clear(rrs[len(kept):])
	return kept
}

// privateHints reports whether an HTTPS or SVCB record's parameters hold a
// private ipv4hint or ipv6hint.
func privateHints(kvs []dns.SVCBKeyValue) bool {
	for _, kv := range kvs {
		switch h := kv.(type) {
		case *dns.SVCBIPv4Hint:
			for _, ip := range h.Hint {
				if privateIP(ip) {
					return true
				}
			}
		case *dns.SVCBIPv6Hint:
			for _, ip := range h.Hint {
				if privateIP(ip) {
					return true
				}
			}
		}
	}
	return false
}

// stripHints removes the private values of the ipv4hint and ipv6hint of
// kvs, and a hint left with none, and reports whether it changed kvs.
func stripHints(kvs []dns.SVCBKeyValue) ([]dns.SVCBKeyValue, bool) {
	if !privateHints(kvs) {
		return kvs, false
	}
	kept := kvs[:0]
	for _, kv := range kvs {
		switch h := kv.(type) {
		case *dns.SVCBIPv4Hint:
			if h.Hint = publicIPs(h.Hint); len(h.Hint) == 0 {
				continue
			}
		case *dns.SVCBIPv6Hint:
			if h.Hint = publicIPs(h.Hint); len(h.Hint) == 0 {
				continue
			}
		}
		kept = append(kept, kv)
	}
	clear(kvs[len(kept):])
	return kept, true
}

// publicIPs returns ips without the private ones, in place.
func publicIPs(ips []net.IP) []net.IP {
	kept := ips[:0]
	for _, ip := range ips {
		if !privateIP(ip) {
			kept = append(kept, ip)
		}
	}
	return kept
}

// privateIP is Private for a net.IP as miekg/dns holds addresses; an
// address of neither length is not judged private.
func privateIP(ip net.IP) bool {
	a, ok := netip.AddrFromSlice(ip)
	return ok && Private(a)
}

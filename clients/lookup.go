package clients

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// LookupFunc asks for the PTR name of a private address: through the
// forward zone that covers its reverse name (ReverseName), never the pool
// (spec section 15). It returns the name, or an error matching ErrNoPTR
// when there is none (no zone covers the name, NXDOMAIN, no PTR record):
// that answer is remembered for PTRTTL too. Any other error (a timeout) is
// asked again after a minute. It must return when ctx is done.
type LookupFunc func(ctx context.Context, addr netip.Addr) (string, error)

// ErrNoPTR is what a LookupFunc returns, wrapped or not, for an address
// that has no PTR name.
var ErrNoPTR = errors.New("no PTR name")

// ReverseName is the name whose PTR record names addr: a.b.c.d's is
// d.c.b.a.in-addr.arpa., an IPv6 address's its 32 nibbles under ip6.arpa.
// An IPv4-mapped address is taken as IPv4.
func ReverseName(addr netip.Addr) string {
	r, err := dns.ReverseAddr(canonicalAddr(addr).String())
	if err != nil {
		return ""
	}
	return r
}

// PTRQuery is the query a LookupFunc sends for addr: PTR of
// ReverseName(addr), recursion desired.
func PTRQuery(addr netip.Addr) *dns.Msg {
	q := new(dns.Msg)
	q.SetQuestion(ReverseName(addr), dns.TypePTR)
	return q
}

// PTRName reads the name from the answer to PTRQuery: the first PTR
// record owned by the question's name, fully qualified. NXDOMAIN and an
// answer without one give ErrNoPTR; another rcode an error of its own.
func PTRName(m *dns.Msg) (string, error) {
	switch m.Rcode {
	case dns.RcodeSuccess:
	case dns.RcodeNameError:
		return "", ErrNoPTR
	default:
		return "", fmt.Errorf("PTR lookup: %s", dns.RcodeToString[m.Rcode])
	}
	for _, rr := range m.Answer {
		if p, ok := rr.(*dns.PTR); ok && (len(m.Question) == 0 || strings.EqualFold(p.Hdr.Name, m.Question[0].Name)) {
			return p.Ptr, nil
		}
	}
	return "", ErrNoPTR
}

// ZoneLookup is the LookupFunc of spec section 15 over the query path's
// forward zones: zone returns the exchanger of the forward zone that
// covers a reverse name (the longest match, as the query path picks it),
// or nil when none does, and then nothing is asked (ErrNoPTR): a private
// address's PTR query never goes to the pool. The exchange is bounded by
// the lookup's context (LookupTimeout) and the zone's own read timeout.
func ZoneLookup(zone func(reverseName string) transport.Exchanger) LookupFunc {
	return func(ctx context.Context, addr netip.Addr) (string, error) {
		name := ReverseName(addr)
		if name == "" {
			return "", ErrNoPTR
		}
		ex := zone(name)
		if ex == nil {
			return "", ErrNoPTR
		}
		q, err := transport.NewQuery(PTRQuery(addr))
		if err != nil {
			return "", err
		}
		expiry, _ := ctx.Deadline()
		a, err := ex.Exchange(ctx, q, expiry)
		if err != nil {
			return "", fmt.Errorf("PTR lookup of %s: %w", name, err)
		}
		m := a.Msg
		if m == nil {
			m = new(dns.Msg)
			if err := m.Unpack(a.Raw); err != nil {
				return "", fmt.Errorf("PTR lookup of %s: parsing the answer: %w", name, err)
			}
		}
		return PTRName(m)
	}
}

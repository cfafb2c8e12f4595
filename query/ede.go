package query

import (
	"errors"
	"strings"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
)

// Extended DNS Error codes nxdnsd sets on the answers it makes itself
// (RFC 8914 section 4; spec section 3).
const (
	edeOther                = dns.ExtendedErrorCodeOther                // 0: a client past its share of the upstream slots
	edeStaleAnswer          = dns.ExtendedErrorCodeStaleAnswer          // 3: a stale answer (RFC 8767)
	edeCachedError          = dns.ExtendedErrorCodeCachedError          // 13: a remembered failure (RFC 9520)
	edeProhibited           = dns.ExtendedErrorCodeProhibited           // 18: the client is outside server.allow
	edeStaleNXDomain        = dns.ExtendedErrorCodeStaleNXDOMAINAnswer  // 19: a stale NXDOMAIN
	edeNotSupported         = dns.ExtendedErrorCodeNotSupported         // 21: a zone transfer or a class other than IN
	edeNoReachableAuthority = dns.ExtendedErrorCodeNoReachableAuthority // 22: every upstream failed, or the budget ran out
	edeNetworkError         = dns.ExtendedErrorCodeNetworkError         // 23: the failure was local
)

// edeShareText is the EXTRA-TEXT of the REFUSED a client gets past its
// share of the upstream slots while others wait (actors.ErrShareRefused).
const edeShareText = "this client holds its share of the upstream slots while others wait"

// withEDE adds an Extended DNS Error with code and text (EXTRA-TEXT, "" for
// none) to m's OPT record, and returns m. A client that sent no EDNS gets
// none: m then has no OPT, and EDE lives in the OPT. pack drops it again
// before it would make the answer exceed the client's UDP size.
func withEDE(m *dns.Msg, code uint16, text string) *dns.Msg {
	if opt, _ := findOPT(m.Extra); opt != nil {
		opt.Option = append(opt.Option, &dns.EDNS0_EDE{InfoCode: code, ExtraText: text})
	}
	return m
}

// dropEDE removes the Extended DNS Errors from m's OPT record and reports
// whether there were any.
func dropEDE(m *dns.Msg) bool {
	opt, _ := findOPT(m.Extra)
	if opt == nil {
		return false
	}
	kept := opt.Option[:0]
	for _, o := range opt.Option {
		if o.Option() != dns.EDNS0EDE {
			kept = append(kept, o)
		}
	}
	dropped := len(kept) < len(opt.Option)
	clear(opt.Option[len(kept):])
	opt.Option = kept
	return dropped
}

// poolFailure is the SERVFAIL for a query the pool could not answer: EDE 23
// (Network Error) when the failure was local, else 22 (No Reachable
// Authority), with each upstream tried and how its attempt ended as the
// EXTRA-TEXT, e.g. "quad9: expired; cloudflare: peer_fault".
func (r *request) poolFailure(res actors.Result) *dns.Msg {
	m := r.reply(dns.RcodeServerFailure)
	if !r.edns {
		return m
	}
	code := uint16(edeNoReachableAuthority)
	if actors.Classify(res.Err) == actors.GroupLocalResource {
		code = edeNetworkError
	}
	var b strings.Builder
	for i, a := range res.Attempts {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(a.Upstream)
		b.WriteString(": ")
		b.WriteString(a.Outcome.String())
	}
	if len(res.Attempts) == 0 {
		b.WriteString(failureWithoutAttempt(res.Err))
	}
	return withEDE(m, code, b.String())
}

// failureWithoutAttempt says why the pool ended before any attempt.
func failureWithoutAttempt(err error) string {
	switch {
	case errors.Is(err, actors.ErrBudgetExhausted):
		return "no upstream could take the query in time"
	case errors.Is(err, actors.ErrAllFailed):
		return "no upstream is eligible"
	}
	return "no upstream was tried"
}

// zoneFailure is the SERVFAIL for a forward-zone query its resolver did
// not answer: EDE 22 naming the resolver and how the exchange ended
// (ZoneTimeout or ZoneError).
func (r *request) zoneFailure(resolver, outcome string) *dns.Msg {
	return withEDE(r.reply(dns.RcodeServerFailure), edeNoReachableAuthority, resolver+": "+outcome)
}

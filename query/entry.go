package query

import (
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
)

// Sources of an answer, as the query log's "source" field names them
// (spec section 6).
const (
	SourceSpecial     = "special"      // an RFC 6761 special-use name, answered here
	SourceLocal       = "local"        // a configured local record, answered here
	SourceForwardZone = "forward_zone" // the resolver of a forward zone
	SourcePool        = "pool"         // the upstream pool
	SourceCache       = "cache"        // a fresh cached answer, or a remembered failure
	SourceStale       = "stale"        // an expired cached answer (RFC 8767)
	SourceRefused     = "refused"      // outside server.allow, past max_concurrent_queries, a zone transfer, a class other than IN
	SourceBlocked     = "blocked"      // blocked (spec section 11): the name asked, or a CNAME or DNAME target of its answer
)

// Outcomes of a forward-zone exchange, the outcome label of
// nxdns_forward_zone_queries_total.
const (
	ZoneAnswer  = "answer"  // the resolver answered; its answer went to the client as it was
	ZoneTimeout = "timeout" // the resolver did not answer within its deadline; the client got SERVFAIL
	ZoneError   = "error"   // any other failure of the exchange; the client got SERVFAIL
)

// Entry is everything one answered query's log line and metrics need
// (spec sections 6 and 7). Fields that do not apply to the query's source
// hold their zero value.
type Entry struct {
	// Time is when ServeDNS started on the query.
	Time time.Time

	// Client is the address the query came from; Proto is the listener's
	// transport ("udp", "tcp", "tls", "https"), as the listener passed it
	// to ServeDNS.
	Client netip.AddrPort
	Proto  string

	// ClientName is the name the client gave itself (a DoH path's NAME,
	// server.Request.ClientName), or "".
	ClientName string

	// QName and QType are the question as the client wrote it (case
	// included; the first, when a malformed query had several). QName is ""
	// and QType 0 when the query had no readable question.
	QName string
	QType uint16

	// QClass is the question's class (dns.ClassINET for nearly every
	// query); 0 when the query had no readable question.
	QClass uint16

	// LoopCheck is set for a name under loop-check.nxdnsd.invalid.: a
	// loop check come back (this process's or another nxdnsd's), or a name
	// that looks like one. The daemon counts it in the metrics and keeps
	// it out of the query log and the recent queries (query/loop.go).
	LoopCheck bool // beside QClass: it takes the padding before Rcode

	// Rebind is set when rebinding protection removed private addresses
	// from the answer (spec section 15); Source stays what it was.
	Rebind bool

	// Rcode is the rcode of the answer sent, extended bits included.
	Rcode int

	// Source is one of the Source constants, or "" when the query was
	// answered before resolution (FORMERR, NOTIMP, BADVERS).
	Source string

	// Upstream is, for SourcePool, the name of the upstream the pool
	// attributed the query to, "" when none (logged as null); for
	// SourceForwardZone, the zone's resolver address; otherwise "".
	Upstream string

	// Zone is the forward zone that matched and ZoneOutcome one of the Zone
	// constants; both are "" unless Source is SourceForwardZone.
	Zone        string
	ZoneOutcome string

	// Duration is the time from the start of ServeDNS to the packed answer.
	Duration time.Duration

	// Queued is the time the query spent waiting for an upstream slot.
	Queued time.Duration

	// Attempts is the pool's attempt trail, in order. It aliases memory that
	// is reused by later queries: read it during QueryDone, never keep it.
	Attempts []actors.Attempt

	// PoolErr is the pool's error (see actors.Result.Err), nil when the pool
	// answered or was not asked.
	PoolErr error

	// List is, for SourceBlocked, the list whose rule blocked the query
	// ("rule" for the custom rules); otherwise "".
	List string

	// CacheResult is how the answer cache's lookup ended (CacheHit,
	// CacheMiss, CacheStale, CacheCachedFailure), "" when the cache was not
	// asked (no cache, or a name answered before it).
	CacheResult string
}

// Hooks observes queries. The daemon implements it with the query log and
// the metrics.
type Hooks interface {
	// QueryDone is called once for every query that gets an answer, dropped
	// datagrams excluded, on the goroutine that called ServeDNS, before ServeDNS
	// returns. It must not retain e nor e.Attempts (copy what it keeps):
	// both are reused by later queries. Its strings and errors may be kept.
	QueryDone(e *Entry)
}

// HooksFunc adapts a function to Hooks.
type HooksFunc func(e *Entry)

// QueryDone calls f(e).
func (f HooksFunc) QueryDone(e *Entry) { f(e) }

// RefusedEntry fills e for a query the listener refused itself (past
// server.max_concurrent_queries) from its bytes raw, which it reads only
// during the call: source refused, rcode REFUSED, the question when it can
// be read.
func RefusedEntry(e *Entry, raw []byte, proto string, client netip.AddrPort, now time.Time) {
	*e = Entry{Time: now, Client: client, Proto: proto, Source: SourceRefused, Rcode: dns.RcodeRefused}
	var r request
	if ok, _ := parse(&r, raw, proto); ok && len(r.msg.Question) > 0 {
		q := r.msg.Question[0]
		e.QName, e.QType = q.Name, q.Qtype
	}
}

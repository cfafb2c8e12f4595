// Package transport is where a query goes out: the upstream transports
// behind one interface, Exchanger (one file per address scheme: udp.go with
// its poller, tcp.go, tls.go, https.go), the upstream addresses and the TLS
// set-up. Its sibling wire/server is where a query comes in; both speak the
// message bytes of wire/dnsmsg. The forward-zone client, which exchanges
// through the UDP transport here, is query/forward, beside the query path
// that owns the zones' policy.
package transport

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// Query is one client query on its way to a resolver: parsed, and packed
// once at the edge for every attempt on every upstream. It is the one
// currency of the transports, the pool and the forward zones.
type Query struct {
	// Msg is the query as parsed and trimmed for upstreams. Transports read
	// it (to compare an answer's question, or to parse an answer that needs
	// parsing) and never modify it.
	Msg *dns.Msg

	// Packed is Msg packed, its question uncompressed at offset 12.
	// Transports write their wire ID into its first two bytes, so one Query
	// is exchanged by one goroutine at a time (the pool attempts upstreams
	// one after another).
	Packed []byte

	// Buf is where a transport may put the answer's bytes (Answer.Raw).
	// When the answer may not fit (over UDP: a capacity less than
	// ClientUDPSize(Msg); over DoT: less than the answer), the transport
	// reads into memory of its own and answers with a parsed Msg.
	Buf []byte

	// Client is the address of the client the query is for, whose share
	// of the pool's slots it counts in (actors/share.go); the zero Addr
	// for a query of nxdnsd's own (a cache refresh), which counts in none.
	// Transports ignore it.
	Client netip.Addr
}

// NewQuery packs m into a Query with no answer buffer: what a caller
// without the query path's pooled memory (a test, a probe) exchanges.
func NewQuery(m *dns.Msg) (*Query, error) {
	packed, err := m.Pack()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPack, err)
	}
	return &Query{Msg: m, Packed: packed}, nil
}

// Answer is a transport's answer: Raw when the upstream's bytes can go to
// the client as they are (Layout says where their parts lie), Msg when they
// had to be parsed (an unusual record type, a truncated answer retried over
// TCP, a question spelled with a compression pointer, a transport that
// speaks messages only). Exactly one is set.
type Answer struct {
	Msg    *dns.Msg // with the query's ID
	Raw    []byte   // in Query.Buf; its ID is the wire ID, not the query's
	Layout dnsmsg.AnswerLayout
}

// Exchanger sends one query and returns its answer. It is what one pool
// attempt, and one forward-zone exchange, calls.
//
// Contract for every implementation:
//   - expiry bounds the whole exchange, connection set-up included: when it
//     passes the exchange returns promptly with an error. Zero means no
//     bound but ctx's. The transports turn it into socket deadlines and
//     arm no timer for it on the hot path.
//   - ctx carries the query's cancellation (and a deadline of the caller's,
//     honoured too). Transports that wait on a socket's reader notice a
//     cancellation within cancelPoll instead of watching ctx.Done.
//   - An answer as Msg has the query's ID; an answer as Raw carries the
//     transport's wire ID, which the caller rewrites. q.Msg is never
//     modified.
//   - Errors are placed by actors.Classify: the sentinels of this package,
//     context errors, syscall errors for local resources, and anything else
//     as a peer fault.
type Exchanger interface {
	Exchange(ctx context.Context, q *Query, expiry time.Time) (Answer, error)
}

// ExchangerFunc adapts a function to Exchanger (handy in tests).
type ExchangerFunc func(ctx context.Context, q *Query, expiry time.Time) (Answer, error)

// Exchange calls f(ctx, q, expiry).
func (f ExchangerFunc) Exchange(ctx context.Context, q *Query, expiry time.Time) (Answer, error) {
	return f(ctx, q, expiry)
}

// MsgFunc is the adapter for whatever speaks messages only (the DoH and TCP
// transports, test fakes): it exchanges q.Msg under a context whose
// deadline is expiry, and answers with a Msg.
type MsgFunc func(ctx context.Context, m *dns.Msg) (*dns.Msg, error)

// Exchange calls f with q.Msg and ctx bounded by expiry.
func (f MsgFunc) Exchange(ctx context.Context, q *Query, expiry time.Time) (Answer, error) {
	ctx, cancel := withExpiry(ctx, expiry)
	defer cancel()
	m, err := f(ctx, q.Msg)
	return Answer{Msg: m}, err
}

// withExpiry is ctx ended at expiry, for the exchanges that hand a context
// to code of others (net.Dialer, net/http). A zero expiry adds nothing.
func withExpiry(ctx context.Context, expiry time.Time) (context.Context, context.CancelFunc) {
	if expiry.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, expiry)
}

// bound is the earlier of expiry and ctx's deadline, zero when neither is
// set: the deadline a transport's sockets get.
func bound(ctx context.Context, expiry time.Time) time.Time {
	if d, ok := ctx.Deadline(); ok && (expiry.IsZero() || d.Before(expiry)) {
		return d
	}
	return expiry
}

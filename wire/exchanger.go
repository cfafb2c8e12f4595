// Package wire holds all of nxdnsd's DNS I/O: the client listeners, the
// upstream transports (one file per address scheme), the forward-zone client
// and message helpers.
package wire

import (
	"context"
	"time"

	"github.com/miekg/dns"
)

// Exchanger sends one query and returns its answer. It is what one pool
// attempt calls.
//
// Contract for every implementation:
//   - The returned message has the ID of m: transports choose their own wire
//     IDs and restore m's on the way back. m is never modified, so one
//     message can be attempted on several upstreams in turn.
//   - ctx bounds the whole exchange, connection set-up included; when its
//     deadline passes the exchange returns promptly with an error.
//   - Errors are placed by actors.Classify: the sentinels below, context
//     errors, syscall errors for local resources, and anything else as a
//     peer fault.
type Exchanger interface {
	Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
}

// ExchangerFunc adapts a function to Exchanger (handy in tests).
type ExchangerFunc func(ctx context.Context, m *dns.Msg) (*dns.Msg, error)

// Exchange calls f(ctx, m).
func (f ExchangerFunc) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	return f(ctx, m)
}

// WireQuery is a query for RawExchanger: parsed, and packed once for every
// attempt on every upstream.
type WireQuery struct {
	// Msg is the query; transports without a byte path exchange it.
	Msg *dns.Msg

	// Packed is Msg packed, question uncompressed at offset 12. A
	// RawExchanger writes its wire ID into the first two bytes, so one
	// WireQuery is exchanged by one goroutine at a time (the pool attempts
	// upstreams one after another).
	Packed []byte

	// Buf is where a RawExchanger may read the answer. Its capacity must
	// be at least ClientUDPSize(Msg), or the exchanger uses a buffer of its
	// own and answers with Msg.
	Buf []byte

	// Arrival, when set, is when the client's query arrived, as read by
	// a caller that already had the clock: the pool's deadline counts
	// from it. Zero: from when the pool is called.
	Arrival time.Time
}

// Answer is a RawExchanger's answer: Raw when the upstream's bytes can go
// to the client as they are (Layout says where their parts lie), Msg when
// they had to be parsed (an unusual record type, a truncated answer retried
// over TCP, a question spelled with a compression pointer). Exactly one is
// set.
type Answer struct {
	Msg    *dns.Msg
	Raw    []byte // in WireQuery.Buf; its ID is the wire ID, not the query's
	Layout AnswerLayout
}

// RawExchanger is an Exchanger with a byte path: it sends q.Packed and
// validates the answer in place (LayoutAnswer), unpacking it only when the
// bytes cannot be vouched for. The contract is Exchanger's, but for the ID
// of a Raw answer, which the caller rewrites.
type RawExchanger interface {
	Exchanger
	ExchangeRaw(ctx context.Context, q *WireQuery) (Answer, error)
}

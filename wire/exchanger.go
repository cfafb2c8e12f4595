// Package wire holds all of nxdnsd's DNS I/O: the client listeners, the
// upstream transports (one file per address scheme), the forward-zone client
// and message helpers.
package wire

import (
	"context"

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

// Package forward is the forward-zone client (spec section 5): the one
// resolver of a zone, asked over UDP and, when the answer is truncated,
// over TCP, with no pool and no health. It sits beside the query path
// (query/zones.go), which owns the zones' policy; the exchange itself is
// wire/transport's UDP transport, its TCP fallback included.
package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Client asks one fixed resolver. The read timeout bounds the whole
// exchange, the TCP fallback included.
//
// A Client is safe for concurrent use.
type Client struct {
	resolver    string              // IP:PORT, as configured and as the query log names it
	readTimeout time.Duration       // bounds one whole exchange
	x           transport.Exchanger // UDP, falling back to TCP on truncation
	sockets     io.Closer           // releases what x holds
}

var _ transport.Transport = (*Client)(nil)

// New returns the client of the resolver at IP:PORT. readTimeout bounds
// each whole exchange; opts tune its sockets as for transport.NewUDP.
func New(resolver string, readTimeout time.Duration, opts ...transport.Option) *Client {
	u := transport.NewUDP(resolver, opts...)
	return newClient(resolver, readTimeout, u, u)
}

// newClient builds a Client on any exchanger, so that tests can time it
// with fakes.
func newClient(resolver string, readTimeout time.Duration, x transport.Exchanger, sockets io.Closer) *Client {
	return &Client{resolver: resolver, readTimeout: readTimeout, x: x, sockets: sockets}
}

// Exchange sends q to the resolver and returns its answer.
//
// The exchange gets one deadline, the earlier of expiry (zero: none), ctx's
// and now plus the read timeout, fixed at the start: the UDP transport's
// TCP retry of a truncated answer runs in what is left of it, never in a
// fresh budget. When that deadline passes the error matches
// transport.ErrResolverTimeout — a timeout of the resolver, peer evidence —
// and deliberately not context.DeadlineExceeded: whatever budget the
// caller had, this is the resolver's failure. When ctx is cancelled the
// error matches context.Canceled.
func (c *Client) Exchange(ctx context.Context, q *transport.Query, expiry time.Time) (transport.Answer, error) {
	deadline := time.Now().Add(c.readTimeout)
	if !expiry.IsZero() && expiry.Before(deadline) {
		deadline = expiry
	}
	a, err := c.x.Exchange(ctx, q, deadline)
	if err == nil {
		return a, nil
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return transport.Answer{}, fmt.Errorf("forwarding to %s: %w", c.resolver, context.Canceled)
	}
	if transport.IsTimeout(err) {
		// %v, not %w: the chain would let the deadline match again.
		return transport.Answer{}, fmt.Errorf("forwarding to %s: %w: %v", c.resolver, transport.ErrResolverTimeout, err)
	}
	return transport.Answer{}, fmt.Errorf("forwarding to %s: %w", c.resolver, err)
}

// Close releases the client's sockets, as transport.UDP.Close.
func (c *Client) Close() error {
	return c.sockets.Close()
}

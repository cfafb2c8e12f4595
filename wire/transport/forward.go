package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Forwarder is the forward-zone client (spec section 5): one fixed resolver,
// no pool, no health. It asks over UDP and, when the answer is truncated,
// over TCP; the read timeout bounds the whole exchange, fallback included.
//
// A Forwarder is safe for concurrent use.
type Forwarder struct {
	resolver    string        // IP:PORT, as configured and as the query log names it
	readTimeout time.Duration // bounds one whole exchange
	udp         Exchanger     // returns truncated answers as they came
	tcp         Exchanger     // asked when the UDP answer is truncated
	sockets     io.Closer     // releases what udp and tcp hold
}

var _ Transport = (*Forwarder)(nil)

// NewForwarder returns the client of the resolver at IP:PORT. readTimeout
// bounds each whole exchange; opts tune its sockets as for NewUDP.
func NewForwarder(resolver string, readTimeout time.Duration, opts ...Option) *Forwarder {
	u := NewUDP(resolver, opts...)
	return newForwarder(resolver, readTimeout, (*udpDatagrams)(u), u.tcp, u)
}

// newForwarder builds a Forwarder on any exchangers, so that tests can time
// it with fakes.
func newForwarder(resolver string, readTimeout time.Duration, udp, tcp Exchanger, sockets io.Closer) *Forwarder {
	return &Forwarder{resolver: resolver, readTimeout: readTimeout, udp: udp, tcp: tcp, sockets: sockets}
}

// Exchange sends q to the resolver and returns its answer.
//
// The exchange gets one deadline, the earlier of expiry (zero: none), ctx's
// and now plus the read timeout, fixed at the start: the TCP retry of a
// truncated answer runs in what is left of it, never in a fresh budget.
// When that deadline passes the error matches ErrResolverTimeout — a
// timeout of the resolver, peer evidence — and deliberately not
// context.DeadlineExceeded: whatever budget the caller had, this is the
// resolver's failure. When ctx is cancelled the
// error matches context.Canceled.
func (f *Forwarder) Exchange(ctx context.Context, q *Query, expiry time.Time) (Answer, error) {
	deadline := time.Now().Add(f.readTimeout)
	if !expiry.IsZero() && expiry.Before(deadline) {
		deadline = expiry
	}
	a, err := exchangeFallingBack(ctx, q, deadline, f.udp, f.tcp)
	if err == nil {
		return a, nil
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return Answer{}, fmt.Errorf("forwarding to %s: %w", f.resolver, context.Canceled)
	}
	if IsTimeout(err) {
		// %v, not %w: the chain would let the deadline match again.
		return Answer{}, fmt.Errorf("forwarding to %s: %w: %v", f.resolver, ErrResolverTimeout, err)
	}
	return Answer{}, fmt.Errorf("forwarding to %s: %w", f.resolver, err)
}

// Close releases the forwarder's sockets, as UDP.Close.
func (f *Forwarder) Close() error {
	return f.sockets.Close()
}

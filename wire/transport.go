package wire

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"
)

// Transport is an upstream Exchanger that holds sockets. Close releases the
// idle ones; every Transport is closed by its owner at shutdown.
type Transport interface {
	Exchanger
	io.Closer
}

// Defaults of the transport options. They suit a home forwarder: a handful
// of upstreams, a few hundred queries a second at most.
const (
	// DefaultMaxIdle idle sockets are kept per upstream and protocol: enough
	// to absorb a burst without a socket per query, few enough to not matter.
	DefaultMaxIdle = 16

	// DefaultMaxConns bounds the TCP connections open to one upstream, so a
	// flood of truncated answers cannot open unbounded sockets.
	DefaultMaxConns = 64

	// DefaultIdleTimeout is how long an idle TCP connection is kept. Servers
	// close idle clients after a few seconds (RFC 7766 suggests as little as
	// a few seconds for busy servers); keeping ours shorter avoids most races
	// with that close.
	DefaultIdleTimeout = 5 * time.Second
)

// Option tunes a transport made by NewTransport, NewUDP, NewTCP or
// NewForwarder.
type Option func(*options)

type options struct {
	maxIdle     int
	maxConns    int
	idleTimeout time.Duration
}

func buildOptions(opts []Option) options {
	o := options{maxIdle: DefaultMaxIdle, maxConns: DefaultMaxConns, idleTimeout: DefaultIdleTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithMaxIdle keeps at most n idle sockets (UDP) or connections (TCP) per
// upstream; 0 disables reuse. Default DefaultMaxIdle. Negative n is 0.
func WithMaxIdle(n int) Option {
	return func(o *options) { o.maxIdle = max(n, 0) }
}

// WithMaxConns bounds the TCP connections open to the upstream at once;
// exchanges past it wait for one, bounded by their context. Default
// DefaultMaxConns; n below 1 is 1. The pool's slots usually bound
// concurrency first: pass the upstream's slots here.
func WithMaxConns(n int) Option {
	return func(o *options) { o.maxConns = max(n, 1) }
}

// WithIdleTimeout closes TCP connections idle for longer than d. Default
// DefaultIdleTimeout; d <= 0 keeps the default.
func WithIdleTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.idleTimeout = d
		}
	}
}

// NewTransport returns the transport for a configured upstream address:
// "udp://IP:PORT" (UDP, retried over TCP when the answer is truncated) or
// "tcp://IP:PORT". The tls:// and https:// forms are recognised but not
// supported yet, and yield an error saying so.
func NewTransport(address string, opts ...Option) (Transport, error) {
	scheme, rest, ok := strings.Cut(address, "://")
	if !ok {
		return nil, fmt.Errorf("upstream %q: missing scheme (udp://, tcp://, tls://, https://)", address)
	}
	switch scheme {
	case "udp", "tcp":
		ap, err := netip.ParseAddrPort(rest)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: want %s://IP:PORT: %w", address, scheme, err)
		}
		if scheme == "udp" {
			return NewUDP(ap.String(), opts...), nil
		}
		return NewTCP(ap.String(), opts...), nil
	case "tls", "https":
		return nil, fmt.Errorf("upstream %q: %s:// is not supported yet", address, scheme)
	default:
		return nil, fmt.Errorf("upstream %q: unknown scheme %q", address, scheme)
	}
}

package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/netip"
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
	// DefaultMaxIdle idle connections are kept per upstream and protocol: enough
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

	// DefaultTLSIdleTimeout is how long an idle DoT or DoH connection is
	// kept. Longer than plain TCP's: a new connection costs a TLS handshake
	// (two round trips more), and a server's own idle close is no hazard —
	// DoT's reader and HTTP/2's see it the moment it happens, so a closed
	// connection is never handed to a query.
	DefaultTLSIdleTimeout = 30 * time.Second

	// DefaultPipelineConns is how many DoT connections one upstream gets.
	// Queries are pipelined, so one connection carries any load a home
	// forwarder sees; a second keeps a slow answer or a lost packet on one
	// from delaying every query behind it in the server's stream.
	DefaultPipelineConns = 2
)

// Option tunes a transport made by NewTransport, NewUDP, NewTCP, NewTLS,
// NewHTTPS (and query/forward.New). Each says which transports it applies to; the
// others ignore it.
type Option func(*options)

type options struct {
	maxIdle       int
	maxConns      int
	pipelineConns int
	idleTimeout   time.Duration
	idleSet       bool           // the tests' WithIdleTimeout gave idleTimeout: DoT and DoH keep their default otherwise
	tlsConfig     *tls.Config    // or nil: a fresh configuration
	dialIP        netip.Addr     // or the zero Addr: HOST is dialled as it is (an IP) or resolved by resolver
	resolver      HostResolver   // or nil: a HOST that is a name, without dialIP, cannot be dialled
	rootCAs       *x509.CertPool // or nil: the system roots (or tlsConfig's)
}

func buildOptions(opts []Option) options {
	o := options{
		maxIdle: DefaultMaxIdle, maxConns: DefaultMaxConns,
		pipelineConns: DefaultPipelineConns, idleTimeout: DefaultIdleTimeout,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// idleTimeoutOr returns the idle timeout the tests' WithIdleTimeout gave,
// or def.
func (o options) idleTimeoutOr(def time.Duration) time.Duration {
	if o.idleSet {
		return o.idleTimeout
	}
	return def
}

// WithMaxIdle keeps at most n idle connections (TCP, DoT, DoH) per
// upstream; 0 disables reuse. UDP ignores it: each exchange has a socket
// and a port of its own (see UDP). Default DefaultMaxIdle. Negative n is 0.
func WithMaxIdle(n int) Option {
	return func(o *options) { o.maxIdle = max(n, 0) }
}

// WithMaxConns bounds the TCP connections open to the upstream at once;
// exchanges past it wait for one, bounded by their context. Default
// DefaultMaxConns; n below 1 is 1. The pool's slots usually bound
// concurrency first: pass the upstream's slots here. For DoH it bounds the
// HTTP connections (HTTP/2 needs one; it matters for an HTTP/1.1 server);
// DoT pipelines on DefaultPipelineConns instead.
func WithMaxConns(n int) Option {
	return func(o *options) { o.maxConns = max(n, 1) }
}

// WithDialIP makes DoT and DoH connect to ip instead of resolving the
// address's HOST, which stays the name the certificate must carry (the ip
// key of an upstream). It spares the bootstrap lookup (WithResolver). The zero netip.Addr
// means not set; NewTransport refuses an ip for udp:// and tcp://, whose
// addresses are IPs already.
func WithDialIP(ip netip.Addr) Option {
	return func(o *options) { o.dialIP = ip }
}

// WithRootCAs makes DoT and DoH trust the certificates of pool, and only
// those, instead of the system roots (the ca_file key of an upstream,
// loaded by the configuration): a home-lab resolver with a private CA.
// nil means not set. NewTransport refuses roots for udp:// and tcp://.
// The pool is shared, not copied: it must not be modified afterwards.
func WithRootCAs(pool *x509.CertPool) Option {
	return func(o *options) { o.rootCAs = pool }
}

// NewTransport returns the transport for a parsed upstream address:
//
//	udp://IP:PORT        UDP, retried over TCP when the answer is truncated (UDP)
//	tcp://IP:PORT        TCP (TCP)
//	tls://HOST:PORT      DNS over TLS, RFC 7858 (TLS)
//	https://HOST[:PORT]/PATH  DNS over HTTPS, RFC 8484 (HTTPS)
//
// HOST is the name the server's certificate must carry. The address was
// parsed once, by ParseAddress, where the configuration is read: nothing
// here parses it again. NewTransport refuses the zero Address, and
// WithDialIP or WithRootCAs for udp:// and tcp://.
func NewTransport(addr Address, opts ...Option) (Transport, error) {
	switch addr.scheme {
	case "udp", "tcp":
		if o := buildOptions(opts); o.dialIP.IsValid() || o.rootCAs != nil {
			return nil, fmt.Errorf("upstream %s: a dial IP and root CAs apply only to tls:// and https://", addr)
		}
		if addr.scheme == "udp" {
			return NewUDP(addr.HostPort(), opts...), nil
		}
		return NewTCP(addr.HostPort(), opts...), nil
	case "tls":
		return NewTLS(addr, opts...)
	case "https":
		return NewHTTPS(addr, opts...)
	}
	return nil, errNoAddress
}

// errNoAddress: an Address that ParseAddress did not make.
var errNoAddress = errors.New("wire: no upstream address (the zero Address)")

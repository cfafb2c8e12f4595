package transport

import (
	"crypto/tls"
	"time"
)

// Options only the tests set: production keeps the defaults.

// WithPipelineConns bounds the DoT connections to the upstream; queries
// are pipelined on them, so a few carry any load. Default
// DefaultPipelineConns; n below 1 is 1.
func WithPipelineConns(n int) Option {
	return func(o *options) { o.pipelineConns = max(n, 1) }
}

// WithTLSConfig makes DoT and DoH start from a clone of c instead of an
// empty configuration, say for client certificates. The transport still
// sets TLS 1.2 as the least version when c allows less, the server name
// from the address when c names none, and WithRootCAs' roots when given.
// c is not modified. nil means none.
func WithTLSConfig(c *tls.Config) Option {
	return func(o *options) { o.tlsConfig = c }
}

// WithIdleTimeout closes connections idle for longer than d. Default
// DefaultIdleTimeout for TCP, DefaultTLSIdleTimeout for DoT and DoH; d <= 0
// keeps the default.
func WithIdleTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.idleTimeout, o.idleSet = d, true
		}
	}
}

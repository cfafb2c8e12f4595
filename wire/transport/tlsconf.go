package transport

import (
	"crypto/tls"
	"fmt"
)

// tlsSetup is what NewTLS and NewHTTPS set up alike: addr checked to be
// of scheme, the options applied, where to dial (the pinned ip, or the
// host looked up) and the configuration that verifies the host.
func tlsSetup(addr Address, scheme string, opts []Option) (o options, hd hostDialer, conf *tls.Config, err error) {
	if err := checkScheme(addr, scheme); err != nil {
		return options{}, hostDialer{}, nil, err
	}
	o = buildOptions(opts)
	return o, newHostDialer(o, addr), tlsClientConfig(o, addr.host), nil
}

// tlsClientConfig returns the configuration DoT and DoH verify the server
// named serverName with: a clone of the tests' WithTLSConfig or a fresh one, TLS 1.2
// at least (RFC 7858 and RFC 8484 both require 1.2 or later), serverName
// unless the given configuration names a server itself, and WithRootCAs'
// pool as the only roots when one was given. Without roots of the
// caller's, the system roots verify the server.
func tlsClientConfig(o options, serverName string) *tls.Config {
	var c *tls.Config
	if o.tlsConfig != nil {
		c = o.tlsConfig.Clone()
	} else {
		c = new(tls.Config)
	}
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	if c.ServerName == "" {
		c.ServerName = serverName
	}
	if o.rootCAs != nil {
		c.RootCAs = o.rootCAs
	}
	if c.ClientSessionCache == nil {
		// Resumption makes a redial after an idle close one round trip
		// cheaper and skips the certificate chain.
		c.ClientSessionCache = tls.NewLRUClientSessionCache(sessionCacheSize)
	}
	return c
}

// sessionCacheSize is the TLS sessions kept per upstream: one per
// connection of DoT's few, and HTTP/2 needs one.
const sessionCacheSize = 4

// checkScheme fails unless addr is of the scheme the constructor serves.
func checkScheme(addr Address, scheme string) error {
	if addr.scheme == "" {
		return errNoAddress
	}
	if addr.scheme != scheme {
		return fmt.Errorf("wire: %s is not a %s:// address", addr, scheme)
	}
	return nil
}

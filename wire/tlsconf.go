package wire

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"

	"github.com/nxdnsd/nxdnsd/internal/cafile"
)

// tlsClientConfig returns the configuration DoT and DoH verify the server
// named serverName with: a clone of WithTLSConfig's or a fresh one, TLS 1.2
// at least (RFC 7858 and RFC 8484 both require 1.2 or later), serverName
// unless the given configuration names a server itself, and WithCAFile's
// certificates as the only roots when a file was given. Without a CA file
// or roots of the caller's, the system roots verify the server.
func tlsClientConfig(o options, serverName string) (*tls.Config, error) {
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
	if o.caFile != "" {
		roots, err := loadCAFile(o.caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = roots
	}
	if c.ClientSessionCache == nil {
		// Resumption makes a redial after an idle close one round trip
		// cheaper and skips the certificate chain.
		c.ClientSessionCache = tls.NewLRUClientSessionCache(sessionCacheSize)
	}
	return c, nil
}

// sessionCacheSize is the TLS sessions kept per upstream: one per
// connection of DoT's few, and HTTP/2 needs one.
const sessionCacheSize = 4

// loadCAFile reads the ca_file at path (see cafile.Load), its errors
// naming the key.
func loadCAFile(path string) (*x509.CertPool, error) {
	pool, err := cafile.Load(path)
	var perr *fs.PathError
	switch {
	case errors.As(err, &perr):
		return nil, fmt.Errorf("reading ca_file: %w", err)
	case err != nil:
		return nil, fmt.Errorf("ca_file %w", err)
	}
	return pool, nil
}

// dialAddress returns where DoT and DoH connect for the server at host and
// port: WithDialIP's address when one was given (the ip key pins it; host
// stays the TLS name), else host itself, which the dialer resolves.
func dialAddress(o options, host, port string) (string, error) {
	if o.dialIP == "" {
		return net.JoinHostPort(host, port), nil
	}
	ip, err := netip.ParseAddr(o.dialIP)
	if err != nil {
		return "", fmt.Errorf("ip %q is not an IP address", o.dialIP)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// errNoServerName: a DoT or DoH address without a host leaves nothing to
// verify the certificate against.
var errNoServerName = errors.New("no host to verify the server's certificate against")

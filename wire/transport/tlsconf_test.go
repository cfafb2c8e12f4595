package transport

import (
	"crypto/tls"
	"testing"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// WithTLSConfig's configuration is a starting point: the transport raises
// its version floor, names the server when it names none, takes
// WithRootCAs' pool over its own roots, and never modifies it.
func TestTLSClientConfigStartsFromTheCallers(t *testing.T) {
	t.Parallel()
	ca := wiretest.NewCA(t)
	base := &tls.Config{MinVersion: tls.VersionTLS10}

	roots := ca.Pool()
	c := tlsClientConfig(buildOptions([]Option{WithTLSConfig(base), WithRootCAs(roots)}), "dns.example")
	if c.MinVersion != tls.VersionTLS12 || c.ServerName != "dns.example" || c.RootCAs != roots || c.ClientSessionCache == nil {
		t.Errorf("config: min version %#x, server name %q, roots %v, session cache %v; want TLS 1.2, dns.example, the CA's, one",
			c.MinVersion, c.ServerName, c.RootCAs, c.ClientSessionCache)
	}
	if base.MinVersion != tls.VersionTLS10 || base.ServerName != "" || base.RootCAs != nil || base.ClientSessionCache != nil {
		t.Error("the caller's configuration was modified")
	}

	named := &tls.Config{ServerName: "other.example", MinVersion: tls.VersionTLS13}
	c = tlsClientConfig(buildOptions([]Option{WithTLSConfig(named)}), "dns.example")
	if c.ServerName != "other.example" || c.MinVersion != tls.VersionTLS13 || c.RootCAs != nil {
		t.Errorf("config: server name %q, min version %#x, roots %v; want the caller's name and version, system roots",
			c.ServerName, c.MinVersion, c.RootCAs)
	}
}

// A transport given the roots by WithTLSConfig instead of WithRootCAs
// verifies the server with them, over DoT and DoH alike.
func TestTLSConfigRootsVerifyTheServer(t *testing.T) {
	t.Parallel()
	ca := wiretest.NewCA(t)
	cert := ca.Certificate(t, wiretest.TLSName)
	for _, address := range []string{
		wiretest.NewDoTServer(t, cert, wiretest.Answer()).Upstream(),
		wiretest.NewDoHServer(t, cert, wiretest.Answer()).Upstream(),
	} {
		tr := newTestTransport(t, address, WithDialIP(loopback), WithTLSConfig(&tls.Config{RootCAs: ca.Pool()}))
		mustAnswer(t, tr, query("example.com"))
	}
}

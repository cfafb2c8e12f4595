package wire

import (
	"crypto/tls"
	"testing"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// WithTLSConfig's configuration is a starting point: the transport raises
// its version floor, names the server when it names none, takes the CA
// file's roots over its own, and never modifies it.
func TestTLSClientConfigStartsFromTheCallers(t *testing.T) {
	t.Parallel()
	ca := wiretest.NewCA(t)
	base := &tls.Config{MinVersion: tls.VersionTLS10}

	c, err := tlsClientConfig(buildOptions([]Option{WithTLSConfig(base), WithCAFile(ca.WriteFile(t))}), "dns.example")
	if err != nil {
		t.Fatal(err)
	}
	if c.MinVersion != tls.VersionTLS12 || c.ServerName != "dns.example" || c.RootCAs == nil || c.ClientSessionCache == nil {
		t.Errorf("config: min version %#x, server name %q, roots %v, session cache %v; want TLS 1.2, dns.example, the CA's, one",
			c.MinVersion, c.ServerName, c.RootCAs, c.ClientSessionCache)
	}
	if base.MinVersion != tls.VersionTLS10 || base.ServerName != "" || base.RootCAs != nil || base.ClientSessionCache != nil {
		t.Error("the caller's configuration was modified")
	}

	named := &tls.Config{ServerName: "other.example", MinVersion: tls.VersionTLS13}
	c, err = tlsClientConfig(buildOptions([]Option{WithTLSConfig(named)}), "dns.example")
	if err != nil {
		t.Fatal(err)
	}
	if c.ServerName != "other.example" || c.MinVersion != tls.VersionTLS13 || c.RootCAs != nil {
		t.Errorf("config: server name %q, min version %#x, roots %v; want the caller's name and version, system roots",
			c.ServerName, c.MinVersion, c.RootCAs)
	}
}

// A transport given the roots by WithTLSConfig instead of a CA file
// verifies the server with them, over DoT and DoH alike.
func TestTLSConfigRootsVerifyTheServer(t *testing.T) {
	t.Parallel()
	ca := wiretest.NewCA(t)
	cert := ca.Certificate(t, wiretest.TLSName)
	for _, address := range []string{
		wiretest.NewDoTServer(t, cert, wiretest.Answer()).Upstream(),
		wiretest.NewDoHServer(t, cert, wiretest.Answer()).Upstream(),
	} {
		tr := newTestTransport(t, address, WithDialIP("127.0.0.1"), WithTLSConfig(&tls.Config{RootCAs: ca.Pool()}))
		mustAnswer(t, tr, query("example.com"))
	}
}

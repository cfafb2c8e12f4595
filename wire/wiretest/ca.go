package wiretest

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/internal/testca"
)

// TLSName is the name in the fakes' usual certificates: tests address a
// DoT or DoH fake as this host and pin the dial to 127.0.0.1, which tests
// the ip key on the way. The .test TLD is reserved for testing (RFC 6761),
// so the name cannot reach a real server.
const TLSName = testca.TLSName

// CA is a throwaway certificate authority: a key made for one test, a
// self-signed root, and leaf certificates it issues for the fakes. Nothing
// of it outlives the test. Pool and PEM are testca.CA's.
type CA struct {
	*testca.CA
}

// certLifetime is how long the CA and its leaves are valid either side of
// now: enough for any test, and a clock a little off does not matter.
const certLifetime = time.Hour

// NewCA makes a CA with a fresh ECDSA P-256 key.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	now := time.Now()
	ca, err := testca.New("wiretest throwaway CA", now.Add(-certLifetime), now.Add(certLifetime))
	if err != nil {
		tb.Fatalf("wiretest: %v", err)
	}
	return &CA{CA: ca}
}

// WriteFile writes the CA's certificate to a PEM file in the test's
// temporary directory and returns its path, for a ca_file key.
func (ca *CA) WriteFile(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "ca.pem")
	if err := os.WriteFile(path, ca.PEM(), 0o600); err != nil {
		tb.Fatalf("wiretest: writing the CA file: %v", err)
	}
	return path
}

// Certificate issues a server certificate for names, each a DNS name or an
// IP literal, with a fresh key. Certificate(tb, TLSName, "127.0.0.1") is the
// usual one; a certificate naming another host makes a server that fails
// verification.
func (ca *CA) Certificate(tb testing.TB, names ...string) tls.Certificate {
	tb.Helper()
	cert, err := ca.Issue(names...)
	if err != nil {
		tb.Fatalf("wiretest: %v", err)
	}
	return cert
}

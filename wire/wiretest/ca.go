package wiretest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSName is the name in the fakes' usual certificates: tests address a
// DoT or DoH fake as this host and pin the dial to 127.0.0.1, which tests
// the ip key on the way. The .test TLD is reserved for testing (RFC 6761),
// so the name cannot reach a real server.
const TLSName = "dns.test"

// CA is a throwaway certificate authority: a key made for one test, a
// self-signed root, and leaf certificates it issues for the fakes. Nothing
// of it outlives the test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte // cert, PEM-encoded
}

// certLifetime is how long the CA and its leaves are valid either side of
// now: enough for any test, and a clock a little off does not matter.
const certLifetime = time.Hour

// NewCA makes a CA with a fresh ECDSA P-256 key.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("wiretest: generating a CA key: %v", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: "wiretest throwaway CA"},
		NotBefore:             now.Add(-certLifetime),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("wiretest: self-signing the CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("wiretest: parsing the CA: %v", err)
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool returns a pool trusting the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// PEM returns the CA's certificate, PEM-encoded: a ca_file's contents.
func (ca *CA) PEM() []byte { return ca.pem }

// WriteFile writes the CA's certificate to a PEM file in the test's
// temporary directory and returns its path, for ca_file and WithCAFile.
func (ca *CA) WriteFile(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "ca.pem")
	if err := os.WriteFile(path, ca.pem, 0o600); err != nil {
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
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("wiretest: generating a server key: %v", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    now.Add(-certLifetime),
		NotAfter:     now.Add(certLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatalf("wiretest: issuing a certificate for %v: %v", names, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serial returns a random certificate serial number.
func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		tb.Fatalf("wiretest: drawing a serial number: %v", err)
	}
	return n
}

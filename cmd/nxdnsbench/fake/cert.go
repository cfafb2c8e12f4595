package fake

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// TLSName is the name in the certificates CA issues for the fakes: a
// client addresses a DoT fake as this host and dials 127.0.0.1. The .test
// TLD is reserved for testing (RFC 6761), so the name reaches no real
// server.
const TLSName = "dns.test"

// certSkew is how far back a certificate's validity starts, so that a
// clock a little off does not refuse it.
const certSkew = 5 * time.Minute

// CA is a throwaway certificate authority made in memory: a fresh ECDSA
// P-256 key, a self-signed root and the server certificates it issues.
// Nothing of it is written anywhere but where its caller writes PEM.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte // cert, PEM-encoded
}

// NewCA makes a CA valid from a few minutes ago until lifetime from now;
// the certificates it issues expire with it.
func NewCA(lifetime time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("fake: generating a CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "nxdnsbench throwaway CA"},
		NotBefore:             now.Add(-certSkew),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("fake: self-signing the CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("fake: parsing the CA: %w", err)
	}
	return &CA{
		cert: cert, key: key,
		pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}

// PEM returns the CA's certificate, PEM-encoded: a ca_file's contents.
func (ca *CA) PEM() []byte { return ca.pem }

// Pool returns a certificate pool trusting the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// ServerConfig issues a certificate for names, each a DNS name or an IP
// literal (TLSName and "127.0.0.1" for the fakes), with a fresh ECDSA
// P-256 key, valid until the CA expires, and returns a server configuration presenting it, for
// Config.TLS.
func (ca *CA) ServerConfig(names ...string) (*tls.Config, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("fake: a certificate for no name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("fake: generating a server key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    now.Add(-certSkew),
		NotAfter:     ca.cert.NotAfter,
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
		return nil, fmt.Errorf("fake: issuing a certificate for %v: %w", names, err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// serial returns a random certificate serial number.
func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("fake: drawing a serial number: %w", err)
	}
	return n, nil
}

// Package testca makes throwaway certificate authorities in memory for
// the fakes that speak DNS over TLS and HTTPS: the tests' (wire/wiretest)
// and the benchmark's (cmd/nxdnsbench/fake). nxdnsd never imports it.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// TLSName is the name in the fakes' usual certificates: a client addresses
// a fake as this host and pins the dial to 127.0.0.1. The .test TLD is
// reserved for testing (RFC 6761), so the name reaches no real server.
const TLSName = "dns.test"

// CA is a throwaway certificate authority: a fresh ECDSA P-256 key, a
// self-signed root and the server certificates it issues. Nothing of it is
// written anywhere but where its caller writes its PEM.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte // cert, PEM-encoded
}

// New makes a CA named name, valid from notBefore to notAfter; the
// certificates it issues are valid as long as it is.
func New(name string, notBefore, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testca: generating a CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("testca: self-signing the CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("testca: parsing the CA: %w", err)
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// PEM returns the CA's certificate, PEM-encoded: a ca_file's contents.
func (ca *CA) PEM() []byte { return ca.pem }

// Pool returns a certificate pool trusting the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Issue issues a server certificate for names, each a DNS name or an IP
// literal, with a fresh ECDSA P-256 key, valid as long as the CA.
func (ca *CA) Issue(names ...string) (tls.Certificate, error) {
	if len(names) == 0 {
		return tls.Certificate{}, errors.New("testca: a certificate for no name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("testca: generating a server key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    ca.cert.NotBefore,
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
		return tls.Certificate{}, fmt.Errorf("testca: issuing a certificate for %v: %w", names, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// serial returns a random certificate serial number.
func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("testca: drawing a serial number: %w", err)
	}
	return n, nil
}

package testca

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
)

// PEMPair encodes a certificate that Issue made as the two PEM files a
// server is configured with: its chain and its PKCS #8 private key.
func PEMPair(cert tls.Certificate) (certPEM, keyPEM []byte, err error) {
	for _, der := range cert.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return nil, nil, fmt.Errorf("testca: encoding the private key: %w", err)
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), nil
}

// WritePair writes cert's chain and key as PEM files named certName and
// keyName in dir (created with mode 0600, replaced when they exist, as a
// certificate renewal replaces them) and returns their paths.
func WritePair(dir, certName, keyName string, cert tls.Certificate) (certFile, keyFile string, err error) {
	certPEM, keyPEM, err := PEMPair(cert)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, certName), filepath.Join(dir, keyName)
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("testca: %w", err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("testca: %w", err)
	}
	return certFile, keyFile, nil
}

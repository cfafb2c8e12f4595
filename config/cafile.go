package config

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"github.com/nxdnsd/nxdnsd/internal/safefile"
)

// loadCAFile reads the PEM certificates of a ca_file into a pool, once:
// validation keeps the pool (Upstream.RootCAs) and the transport trusts it
// without reading the file again. It refuses a file without a certificate
// and one where any CERTIFICATE block does not parse: a damaged bundle must
// not silently trust fewer CAs than its owner thinks (x509.CertPool's
// AppendCertsFromPEM would skip the bad block). A file that cannot be read
// gives a *fs.PathError (safefile's rules: a regular file, symlinks
// followed, at most MaxFileBytes); every other error starts with path.
func loadCAFile(path string) (*x509.CertPool, error) {
	data, err := safefile.ReadFile(path, MaxFileBytes)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		n++
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %w", path, n, err)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate found", path)
	}
	return pool, nil
}

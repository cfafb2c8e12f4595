package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/nxdnsd/nxdnsd/internal/safefile"
)

// encrypted checks server.tls_listen, server.https_listen and the
// certificate pair, and sets s.Certificate. listens are the server.listen
// addresses already accepted (TCP is bound on each), which an encrypted
// address must not repeat. With a listener the pair is read (so -check
// vouches for it, and a reload reads it again); a listener without a
// readable, matching pair is a problem at server.cert_file (spec section
// 14), whichever file is at fault. Without one the files are not read:
// nothing would present them.
func (ck *checker) encrypted(s *Server, listens firsts[netip.AddrPort]) {
	s.Certificate = nil
	if len(s.TLSListen) == 0 {
		s.TLSListen = nil // "tls_listen = []" and no key are one configuration
	}
	if len(s.HTTPSListen) == 0 {
		s.HTTPSListen = nil
	}
	seen := make(map[netip.AddrPort]string)
	for _, table := range []struct {
		key  string
		list []string
	}{{"server.tls_listen", s.TLSListen}, {"server.https_listen", s.HTTPSListen}} {
		for i, l := range table.list {
			path := fmt.Sprintf("%s[%d]", table.key, i)
			ap, ok := ck.bindAddr(path, l)
			if !ok || ap.Port() == 0 {
				continue
			}
			if j, clash := listens[ap]; clash {
				ck.add(path, "%q is also server.listen[%d], which serves TCP there", l, j)
				continue
			}
			if other, dup := seen[ap]; dup {
				ck.add(path, "%q is also %s", l, other)
				continue
			}
			seen[ap] = path
		}
	}
	if s.TLSListen == nil && s.HTTPSListen == nil {
		return
	}
	switch {
	case s.CertFile == "" && s.KeyFile == "":
		ck.add("server.cert_file", "tls_listen and https_listen need a certificate: set cert_file and key_file (PEM files)")
		return
	case s.CertFile == "":
		ck.add("server.cert_file", "is empty, but key_file is set: set both (PEM files)")
		return
	case s.KeyFile == "":
		ck.add("server.cert_file", "%q has no key: set key_file too (a PEM private key)", s.CertFile)
		return
	}
	cert, err := LoadKeyPair(s.CertFile, s.KeyFile)
	if err != nil {
		ck.add("server.cert_file", "%v", err)
		return
	}
	s.Certificate = cert
}

// LoadKeyPair reads a PEM certificate chain and its private key, as
// cert_file and key_file name them, and checks that they belong together.
// Both files follow safefile's rules (regular files, symlinks followed, as
// certbot's live/ directory has them, at most MaxFileBytes). The error
// names the file at fault.
func LoadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := safefile.ReadFile(certFile, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("reading cert_file: %w", err)
	}
	keyPEM, err := safefile.ReadFile(keyFile, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("reading key_file: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s and %s are not a certificate and its key: %w", certFile, keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%s: %w", certFile, err)
		}
	}
	return &cert, nil
}

// resolveTLSFiles takes a relative cert_file and key_file relative to dir,
// the configuration file's directory, as ca_file is.
func (s *Server) resolveTLSFiles(dir string) {
	for _, f := range []*string{&s.CertFile, &s.KeyFile} {
		if *f != "" && !filepath.IsAbs(*f) {
			*f = filepath.Join(dir, *f)
		}
	}
}

// certificateWarning says when c has expired or is not valid yet, or "".
func certificateWarning(c *tls.Certificate, now time.Time) string {
	if c == nil || c.Leaf == nil {
		return ""
	}
	switch {
	case now.After(c.Leaf.NotAfter):
		return fmt.Sprintf("the certificate expired at %s: clients will refuse it", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(c.Leaf.NotBefore):
		return fmt.Sprintf("the certificate is valid only from %s: clients will refuse it until then", c.Leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return ""
}

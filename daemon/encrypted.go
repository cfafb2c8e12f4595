package daemon

import (
	"crypto/tls"
	"errors"
	"slices"
	"strings"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/wire/server"
)

// The encrypted listeners (spec section 14) are listeners like the
// server.listen ones: one server.Server per address, sharing the
// daemon's admission, kept, added and removed by a reload as theirs are.
// They go in d.listeners under the address with its protocol in front
// (tlsPrefix, httpsPrefix), so that a DoT and a DoH address never meet a
// plain one, and serve the certificate in d.cert, which a reload replaces
// for the next handshake.
const (
	tlsPrefix   = "tls://"
	httpsPrefix = "https://"
)

// errNoCertificate is a handshake's error when no certificate is
// configured; validation refuses a listener without one, so it is not
// seen unless a reload races a listener it removes.
var errNoCertificate = errors.New("daemon: no certificate configured (server.cert_file)")

// listenAddrs returns the addresses of every client listener of cfg:
// server.listen's as they are, then tls_listen's and https_listen's
// behind their prefixes.
func listenAddrs(cfg *config.Config) []string {
	s := cfg.Server
	out := slices.Clip(slices.Clone(s.Listen))
	for _, a := range s.TLSListen {
		out = append(out, tlsPrefix+a)
	}
	for _, a := range s.HTTPSListen {
		out = append(out, httpsPrefix+a)
	}
	return out
}

// listenEncrypted makes srv the server of addr, an address of
// listenAddrs, when it is an encrypted listener's, and reports whether it
// was.
func (d *Daemon) listenEncrypted(srv *server.Server, addr string) bool {
	if a, ok := strings.CutPrefix(addr, tlsPrefix); ok {
		srv.TLSListen = []string{a}
	} else if a, ok := strings.CutPrefix(addr, httpsPrefix); ok {
		srv.HTTPSListen = []string{a}
	} else {
		return false
	}
	srv.TLSConfig = &tls.Config{GetCertificate: d.certificate}
	return true
}

// certificate is the encrypted listeners' tls.Config.GetCertificate: the
// pair of the running configuration, read once per handshake, so that a
// reload's new pair reaches the next connection and no other.
func (d *Daemon) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := d.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errNoCertificate
}

// EncryptedAddrs returns the bound DoT and DoH addresses, each in the
// order of server.tls_listen and server.https_listen.
func (d *Daemon) EncryptedAddrs() (dot, doh []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.listeners {
		t, h := l.srv.EncryptedAddrs()
		for _, a := range t {
			dot = append(dot, a.String())
		}
		for _, a := range h {
			doh = append(doh, a.String())
		}
	}
	return dot, doh
}

package fake

import (
	"crypto/tls"
	"time"

	"github.com/nxdnsd/nxdnsd/internal/testca"
)

// TLSName is the name in the certificates CA issues for the fakes: a
// client addresses a DoT fake as this host and dials 127.0.0.1.
const TLSName = testca.TLSName

// certSkew is how far back a certificate's validity starts, so that a
// clock a little off does not refuse it.
const certSkew = 5 * time.Minute

// CA is a throwaway certificate authority made in memory (testca.CA):
// PEM gives a ca_file's contents, Pool a pool trusting it alone.
type CA struct {
	*testca.CA
}

// NewCA makes a CA valid from a few minutes ago until lifetime from now;
// the certificates it issues expire with it.
func NewCA(lifetime time.Duration) (*CA, error) {
	now := time.Now()
	ca, err := testca.New("nxdnsbench throwaway CA", now.Add(-certSkew), now.Add(lifetime))
	if err != nil {
		return nil, err
	}
	return &CA{CA: ca}, nil
}

// ServerConfig issues a certificate for names, each a DNS name or an IP
// literal (TLSName and "127.0.0.1" for the fakes), and returns a server
// configuration presenting it, for Config.TLS.
func (ca *CA) ServerConfig(names ...string) (*tls.Config, error) {
	cert, err := ca.Issue(names...)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testdata is the repository's shared directory of configuration files.
const testdata = "../testdata/config"

// okUpstream completes a TOML snippet whose subject is not the upstreams.
const okUpstream = "\n[[upstreams]]\naddress = \"udp://9.9.9.9:53\"\n"

// problemsOf returns err as Problems, failing the test if it is anything
// else.
func problemsOf(tb testing.TB, err error) Problems {
	tb.Helper()
	var ps Problems
	if !errors.As(err, &ps) {
		tb.Fatalf("error %v (%T) is not Problems", err, err)
	}
	if len(ps) == 0 {
		tb.Fatal("empty Problems returned as an error")
	}
	return ps
}

// pathsOf is the list of paths in a Parse or Load result: nil when valid.
func pathsOf(tb testing.TB, cfg *Config, err error) []string {
	tb.Helper()
	if err == nil {
		if cfg == nil {
			tb.Fatal("nil config without an error")
		}
		return nil
	}
	if cfg != nil {
		tb.Fatalf("config returned along with error %v", err)
	}
	var paths []string
	for _, p := range problemsOf(tb, err) {
		paths = append(paths, p.Path)
	}
	return paths
}

// mustParse parses src and fails the test on any problem.
func mustParse(tb testing.TB, src string) *Config {
	tb.Helper()
	cfg, err := Parse([]byte(src))
	if err != nil {
		tb.Fatalf("Parse:\n%v\nsource:\n%s", err, src)
	}
	return cfg
}

func assertPaths(tb testing.TB, got, want []string, detail error) {
	tb.Helper()
	if !slices.Equal(got, want) {
		tb.Errorf("problem paths = %q, want %q\nerror:\n%v", got, want, detail)
	}
}

// writeCA writes a freshly generated self-signed CA certificate as PEM into
// a test-owned directory and returns the file's path.
func writeCA(tb testing.TB) string {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nxdnsd config test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	return writeFile(tb, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// mustAddr is transport.ParseAddress, failing the test on an error.
func mustAddr(tb testing.TB, address string) transport.Address {
	tb.Helper()
	a, err := transport.ParseAddress(address)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// mustLoadCA is the pool of the CA file at path.
func mustLoadCA(tb testing.TB, path string) *x509.CertPool {
	tb.Helper()
	pool, err := loadCAFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return pool
}

// withoutParsed is c with the fields validation parses (those tagged
// toml:"-") cleared, c itself unchanged: what the file wrote, normalised.
func withoutParsed(c Config) Config {
	c = withoutRRs(c)
	c.Upstreams = slices.Clone(c.Upstreams)
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		u.Addr, u.DialIP, u.RootCAs = transport.Address{}, netip.Addr{}, nil
	}
	c.Server.AllowPrefixes, c.Server.RebindAllowNames = nil, nil
	c.Clients.Static = slices.Clone(c.Clients.Static)
	for i := range c.Clients.Static {
		c.Clients.Static[i].Addrs = nil
	}
	return c
}

// withoutRRs is c with its local records' RR cleared, c itself unchanged.
func withoutRRs(c Config) Config {
	c.LocalRecords = slices.Clone(c.LocalRecords)
	for i := range c.LocalRecords {
		c.LocalRecords[i].RR = nil
	}
	return c
}

// checkRRs fails the test unless the records validation built are want,
// in presentation form.
func checkRRs(tb testing.TB, rs []LocalRecord, want ...string) {
	tb.Helper()
	got := make([]string, len(rs))
	for i, r := range rs {
		if r.RR != nil {
			got[i] = r.RR.String()
		}
	}
	if !slices.Equal(got, want) {
		tb.Errorf("records =\n%q\nwant\n%q", got, want)
	}
}

func writeFile(tb testing.TB, name string, data []byte) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

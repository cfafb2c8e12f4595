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
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
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

func writeFile(tb testing.TB, name string, data []byte) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

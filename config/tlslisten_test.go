package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/internal/testca"
)

// writePair writes a fresh certificate and key, issued by a throwaway CA,
// into dir and returns their paths.
func writePair(tb testing.TB, dir string) (certFile, keyFile string) {
	tb.Helper()
	now := time.Now()
	ca, err := testca.New("config test CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := ca.Issue("dns.example")
	if err != nil {
		tb.Fatal(err)
	}
	certFile, keyFile, err = testca.WritePair(dir, "cert.pem", "key.pem", cert)
	if err != nil {
		tb.Fatal(err)
	}
	return certFile, keyFile
}

// A listener with a readable, matching pair is valid and carries the
// loaded certificate; "tls_listen = []" is the default.
func TestEncryptedListenersLoadTheirPair(t *testing.T) {
	t.Parallel()
	certFile, keyFile := writePair(t, t.TempDir())
	cfg := mustParse(t, fmt.Sprintf(`
[server]
listen = ["127.0.0.1:53"]
tls_listen = ["127.0.0.1:853", "[::1]:853"]
https_listen = ["127.0.0.1:443"]
cert_file = %q
key_file = %q
`+okUpstream, certFile, keyFile))
	if cfg.Server.Certificate == nil || cfg.Server.Certificate.Leaf == nil || cfg.Server.Certificate.Leaf.DNSNames[0] != "dns.example" {
		t.Fatalf("Certificate = %+v", cfg.Server.Certificate)
	}
	if len(cfg.Server.TLSListen) != 2 || len(cfg.Server.HTTPSListen) != 1 {
		t.Errorf("listen: %q %q", cfg.Server.TLSListen, cfg.Server.HTTPSListen)
	}
	def := mustParse(t, "[server]\ntls_listen = []\nhttps_listen = []\n"+okUpstream)
	if def.Server.TLSListen != nil || def.Server.HTTPSListen != nil || def.Server.Certificate != nil {
		t.Errorf("empty lists: %+v", def.Server)
	}
}

// Every way a listener can be left without its certificate is a problem
// at server.cert_file (spec section 14), and addresses are checked as
// server.listen's are.
func TestEncryptedListenerProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := writePair(t, dir)
	otherCert, otherKey := writePair(t, t.TempDir())
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, server string
		want         []string
		says         string
	}{
		{"no pair", `tls_listen = ["127.0.0.1:853"]`, []string{"server.cert_file"}, "need a certificate"},
		{"no key", fmt.Sprintf("https_listen = [\"127.0.0.1:443\"]\ncert_file = %q", certFile), []string{"server.cert_file"}, "key_file"},
		{"no certificate", fmt.Sprintf("https_listen = [\"127.0.0.1:443\"]\nkey_file = %q", keyFile), []string{"server.cert_file"}, "is empty"},
		{"missing file", fmt.Sprintf("tls_listen = [\"127.0.0.1:853\"]\ncert_file = %q\nkey_file = %q", filepath.Join(dir, "absent.pem"), keyFile), []string{"server.cert_file"}, "absent.pem"},
		{"key of another certificate", fmt.Sprintf("tls_listen = [\"127.0.0.1:853\"]\ncert_file = %q\nkey_file = %q", certFile, otherKey), []string{"server.cert_file"}, "not a certificate and its key"},
		{"not PEM", fmt.Sprintf("tls_listen = [\"127.0.0.1:853\"]\ncert_file = %q\nkey_file = %q", garbage, keyFile), []string{"server.cert_file"}, "not a certificate and its key"},
		{"a directory", fmt.Sprintf("tls_listen = [\"127.0.0.1:853\"]\ncert_file = %q\nkey_file = %q", dir, keyFile), []string{"server.cert_file"}, ""},
		{"a pair without listeners is not read", fmt.Sprintf("cert_file = %q\nkey_file = %q", otherCert, keyFile), nil, ""},
		{"bad addresses", fmt.Sprintf("tls_listen = [\"853\", \"127.0.0.1:53\", \"127.0.0.1:853\"]\nhttps_listen = [\"127.0.0.1:853\", \"[::ffff:127.0.0.1]:443\"]\ncert_file = %q\nkey_file = %q", certFile, keyFile),
			[]string{"server.tls_listen[0]", "server.tls_listen[1]", "server.https_listen[0]", "server.https_listen[1]"}, ""},
	} {
		src := "[server]\nlisten = [\"127.0.0.1:53\"]\n" + tc.server + "\n" + okUpstream
		cfg, err := Parse([]byte(src))
		assertPaths(t, pathsOf(t, cfg, err), tc.want, err)
		if err != nil && !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v does not say %q", tc.name, err, tc.says)
		}
	}
}

// A relative cert_file and key_file are taken from the configuration
// file's directory, as ca_file is (systemd runs nxdnsd in /).
func TestRelativeCertFilesFromTheConfigDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writePair(t, dir)
	path := filepath.Join(dir, "nxdns.toml")
	src := "[server]\ntls_listen = [\"127.0.0.1:853\"]\ncert_file = \"cert.pem\"\nkey_file = \"key.pem\"\n" + okUpstream
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.CertFile != filepath.Join(dir, "cert.pem") || cfg.Server.Certificate == nil {
		t.Errorf("cert_file %q, certificate %v", cfg.Server.CertFile, cfg.Server.Certificate != nil)
	}
}

// -check warns about a certificate that has expired or is not valid yet:
// valid configuration, but clients will refuse it.
func TestCertificateWarning(t *testing.T) {
	t.Parallel()
	certFile, keyFile := writePair(t, t.TempDir())
	cert, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if w := certificateWarning(cert, time.Now()); w != "" {
		t.Errorf("a valid certificate: %q", w)
	}
	if w := certificateWarning(cert, time.Now().Add(2*time.Hour)); !strings.Contains(w, "expired") {
		t.Errorf("an expired certificate: %q", w)
	}
	if w := certificateWarning(cert, time.Now().Add(-2*time.Hour)); !strings.Contains(w, "valid only from") {
		t.Errorf("a certificate not valid yet: %q", w)
	}
}

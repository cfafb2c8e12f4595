package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/internal/testca"
)

// -check reads cert_file and key_file: a key that is not the
// certificate's is one problem at server.cert_file, exit 2; the right
// pair is valid.
func TestCheckValidatesTheCertificatePair(t *testing.T) {
	now := time.Now()
	ca, err := testca.New("check test CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair := func(dir string) (string, string) {
		cert, err := ca.Issue("dns.example")
		if err != nil {
			t.Fatal(err)
		}
		c, k, err := testca.WritePair(dir, "cert.pem", "key.pem", cert)
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	certFile, keyFile := pair(t.TempDir())
	_, otherKey := pair(t.TempDir())
	src := "[server]\nlisten = [\"127.0.0.1:0\"]\ntls_listen = [\"127.0.0.1:0\"]\ncert_file = %q\nkey_file = %q\n[[upstreams]]\naddress = \"udp://127.0.0.1:53\"\n"

	code, _, errs := runArgs("-c", writeConfig(t, fmt.Sprintf(src, certFile, otherKey)), "-check")
	if code != 2 || !strings.HasPrefix(errs, "config: server.cert_file: ") || strings.Count(errs, "\n") != 1 {
		t.Errorf("a mismatched pair: exit %d, stderr %q; want 2 and one line at server.cert_file", code, errs)
	}
	if code, out, errs := runArgs("-c", writeConfig(t, fmt.Sprintf(src, certFile, keyFile)), "-check"); code != 0 || errs != "" {
		t.Errorf("the right pair: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

package config

import (
	"strings"
	"testing"
)

// An upstream named by default is named by its address redacted: the name
// is in metrics, logs, the query log and /api/health, and a DoH path is
// often an account's secret (issue 16). Problems never show the secret
// either. Before the fix the name was the whole URL and a refused
// address's password was printed.
func TestUpstreamSecretsStayHidden(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`
[[upstreams]]
address = "https://dns.nextdns.io/abc123"

[[upstreams]]
address = "https://dns.quad9.net/dns-query"
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Upstreams[0].Name, "https://dns.nextdns.io/…"; got != want {
		t.Errorf("default name %q, want %q", got, want)
	}
	if got, want := cfg.Upstreams[1].Name, "https://dns.quad9.net/dns-query"; got != want {
		t.Errorf("default name %q, want %q", got, want)
	}

	_, err = Parse([]byte(`
[[upstreams]]
address = "https://user:hunter2@dns.example/abc123"

[[upstreams]]
address = "https://dns.nextdns.io/abc123"

[[upstreams]]
address = "https://dns.nextdns.io/def456"
`))
	if err == nil {
		t.Fatal("Parse accepted a password and two upstreams of one default name")
	}
	msg := err.Error()
	for _, secret := range []string{"hunter2", "abc123", "def456"} {
		if strings.Contains(msg, secret) {
			t.Errorf("problems show %q:\n%s", secret, msg)
		}
	}
	for _, path := range []string{"upstreams[0].address", "upstreams[2].name"} {
		if !strings.Contains(msg, path) {
			t.Errorf("problems do not name %s:\n%s", path, msg)
		}
	}
}

package wire

import (
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

func TestNewTransport(t *testing.T) {
	t.Parallel()
	cases := []struct {
		address string
		want    string // the transport's type, or "" for an error
		errHas  string
	}{
		{"udp://192.0.2.1:53", "udp", ""},
		{"tcp://192.0.2.1:53", "tcp", ""},
		{"udp://[2001:db8::1]:53", "udp", ""},
		{"tls://dns.quad9.net:853", "tls", ""},
		{"tls://[2001:db8::1]:853", "tls", ""},
		{"https://dns.example/dns-query", "https", ""},
		{"https://dns.example:8443/dns-query", "https", ""},
		{"tls://dns.quad9.net", "", "tls://HOST:PORT"},
		{"tls://:853", "", "tls://HOST:PORT"},
		{"https://dns.example", "", "https://HOST[:PORT]/PATH"},
		{"https://dns.example:0/dns-query", "", "https://HOST[:PORT]/PATH"},
		{"udp://dns.example:53", "", "IP:PORT"},
		{"udp://192.0.2.1", "", "IP:PORT"},
		{"quic://192.0.2.1:853", "", "unknown scheme"},
		{"192.0.2.1:53", "", "missing scheme"},
	}
	for _, c := range cases {
		tr, err := NewTransport(c.address)
		if c.want == "" {
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("NewTransport(%q) = %v, %v; want an error saying %q", c.address, tr, err, c.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("NewTransport(%q): %v", c.address, err)
			continue
		}
		var got string
		switch tr.(type) {
		case *UDP:
			got = "udp"
		case *TCP:
			got = "tcp"
		case *TLS:
			got = "tls"
		case *HTTPS:
			got = "https"
		}
		if got != c.want {
			t.Errorf("NewTransport(%q) = %T, want %s", c.address, tr, c.want)
		}
		if err := tr.Close(); err != nil {
			t.Errorf("closing %q: %v", c.address, err)
		}
	}
}

// The factory's transports work end to end and take the options.
func TestNewTransportExchanges(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Answer())
	for _, scheme := range []string{"udp", "tcp"} {
		tr, err := NewTransport(scheme+"://"+srv.Addr, WithMaxIdle(0))
		if err != nil {
			t.Fatal(err)
		}
		mustAnswer(t, tr, query(scheme+".example"))
		mustAnswer(t, tr, query(scheme+".example"))
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// WithMaxIdle(0): nothing is kept, every exchange opens its own socket.
	if got := srv.TCPAccepts(); got != 2 {
		t.Errorf("%d TCP connections with reuse off, want 2", got)
	}
}

// The ip and ca_file options are checked when the transport is made, and
// refused where they do not apply; empty strings mean not set.
func TestNewTransportOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.pem")
	if err := os.WriteFile(broken, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")}), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := wiretest.NewCA(t).WriteFile(t)
	cases := []struct {
		address string
		opts    []Option
		errHas  string // "" for success
	}{
		{"tls://dns.example:853", []Option{WithDialIP(""), WithCAFile("")}, ""},
		{"udp://192.0.2.1:53", []Option{WithDialIP(""), WithCAFile("")}, ""},
		{"tls://dns.example:853", []Option{WithDialIP("192.0.2.53"), WithCAFile(ca)}, ""},
		{"https://dns.example/q", []Option{WithDialIP("2001:db8::53"), WithCAFile(ca)}, ""},
		{"tls://dns.example:853", []Option{WithDialIP("dns.example")}, "not an IP address"},
		{"https://dns.example/q", []Option{WithDialIP("192.0.2.999")}, "not an IP address"},
		{"tls://dns.example:853", []Option{WithCAFile(filepath.Join(dir, "missing.pem"))}, "no such file"},
		{"tls://dns.example:853", []Option{WithCAFile(garbage)}, "no PEM certificate"},
		{"https://dns.example/q", []Option{WithCAFile(broken)}, "certificate 1"},
		{"udp://192.0.2.1:53", []Option{WithDialIP("192.0.2.1")}, "only to tls:// and https://"},
		{"tcp://192.0.2.1:53", []Option{WithCAFile(ca)}, "only to tls:// and https://"},
	}
	for _, c := range cases {
		tr, err := NewTransport(c.address, c.opts...)
		if c.errHas == "" {
			if err != nil {
				t.Errorf("NewTransport(%q): %v", c.address, err)
			} else if err := tr.Close(); err != nil {
				t.Errorf("closing %q: %v", c.address, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.errHas) {
			t.Errorf("NewTransport(%q) = %v; want an error saying %q", c.address, err, c.errHas)
			if err == nil {
				_ = tr.Close()
			}
		}
	}
}

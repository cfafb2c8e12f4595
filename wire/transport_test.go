package wire

import (
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
		{"tls://dns.quad9.net:853", "", "not supported yet"},
		{"https://dns.example/dns-query", "", "not supported yet"},
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

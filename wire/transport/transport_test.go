package transport

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

func TestNewTransport(t *testing.T) {
	t.Parallel()
	cases := []struct {
		address string
		want    string // the transport's type
	}{
		{"udp://192.0.2.1:53", "udp"},
		{"tcp://192.0.2.1:53", "tcp"},
		{"udp://[2001:db8::1]:53", "udp"},
		{"tls://dns.quad9.net:853", "tls"},
		{"tls://[2001:db8::1]:853", "tls"},
		{"https://dns.example/dns-query", "https"},
		{"https://dns.example:8443/dns-query", "https"},
	}
	for _, c := range cases {
		tr, err := NewTransport(mustParseAddress(t, c.address))
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

// An Address that ParseAddress did not make, and an address of another
// scheme than the constructor's, are refused, never dialled.
func TestNewTransportRefusesAddresses(t *testing.T) {
	t.Parallel()
	if tr, err := NewTransport(Address{}); !errors.Is(err, errNoAddress) {
		t.Errorf("NewTransport(Address{}) = %v, %v; want errNoAddress", tr, err)
	}
	if tr, err := NewTLS(Address{}); !errors.Is(err, errNoAddress) {
		t.Errorf("NewTLS(Address{}) = %v, %v; want errNoAddress", tr, err)
	}
	if tr, err := NewHTTPS(mustParseAddress(t, "tls://dns.example:853")); err == nil || !strings.Contains(err.Error(), "not a https:// address") {
		t.Errorf("NewHTTPS(tls://…) = %v, %v; want an error saying it is not https://", tr, err)
	}
	if tr, err := NewTLS(mustParseAddress(t, "https://dns.example/q")); err == nil || !strings.Contains(err.Error(), "not a tls:// address") {
		t.Errorf("NewTLS(https://…) = %v, %v; want an error saying it is not tls://", tr, err)
	}
}

// The factory's transports work end to end and take the options.
func TestNewTransportExchanges(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Answer())
	for _, scheme := range []string{"udp", "tcp"} {
		tr, err := NewTransport(mustParseAddress(t, scheme+"://"+srv.Addr), WithMaxIdle(0))
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

// The ip and ca_file options are refused where they do not apply; zero
// values mean not set.
func TestNewTransportOptions(t *testing.T) {
	t.Parallel()
	roots := wiretest.NewCA(t).Pool()
	cases := []struct {
		address string
		opts    []Option
		errHas  string // "" for success
	}{
		{"tls://dns.example:853", []Option{WithDialIP(netip.Addr{}), WithRootCAs(nil)}, ""},
		{"udp://192.0.2.1:53", []Option{WithDialIP(netip.Addr{}), WithRootCAs(nil)}, ""},
		{"tls://dns.example:853", []Option{WithDialIP(netip.MustParseAddr("192.0.2.53")), WithRootCAs(roots)}, ""},
		{"https://dns.example/q", []Option{WithDialIP(netip.MustParseAddr("2001:db8::53")), WithRootCAs(roots)}, ""},
		{"udp://192.0.2.1:53", []Option{WithDialIP(netip.MustParseAddr("192.0.2.1"))}, "only to tls:// and https://"},
		{"tcp://192.0.2.1:53", []Option{WithRootCAs(roots)}, "only to tls:// and https://"},
	}
	for _, c := range cases {
		tr, err := NewTransport(mustParseAddress(t, c.address), c.opts...)
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

// The ip key pins where DoT and DoH connect, in the address's port, while
// the address's host stays the TLS name; a host that is an IP literal is
// dialled as it is; a name without ip is looked up ("" here).
func TestDialTarget(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		address string
		ip      netip.Addr
		want    string
	}{
		{"tls://dns.example:853", netip.Addr{}, ""},
		{"tls://dns.example:853", netip.MustParseAddr("192.0.2.53"), "192.0.2.53:853"},
		{"tls://192.0.2.7:853", netip.Addr{}, "192.0.2.7:853"},
		{"https://dns.example/q", netip.MustParseAddr("2001:db8::53"), "[2001:db8::53]:443"},
		{"https://[2001:db8::7]:8443/q", netip.Addr{}, "[2001:db8::7]:8443"},
		{"https://dns.example:8443/q", netip.Addr{}, ""},
	} {
		o := buildOptions([]Option{WithDialIP(c.ip)})
		d := newHostDialer(o, mustParseAddress(t, c.address))
		got := ""
		if d.pinned.IsValid() {
			got = d.pinned.String()
		}
		if got != c.want || d.needsLookup() != (c.want == "") {
			t.Errorf("newHostDialer(%s, ip %v) pins %q (lookup %v), want %q", c.address, c.ip, got, d.needsLookup(), c.want)
		}
	}
}

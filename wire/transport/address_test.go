package transport

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAddress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in       string
		want     Address
		hostPort string
		str      string
	}{
		{"udp://9.9.9.9:53", Address{"udp", "9.9.9.9", 53, ""}, "9.9.9.9:53", "udp://9.9.9.9:53"},
		{"tcp://[2620:FE::FE]:53", Address{"tcp", "2620:fe::fe", 53, ""}, "[2620:fe::fe]:53", "tcp://[2620:fe::fe]:53"},
		{"UDP://1.1.1.1:053", Address{"udp", "1.1.1.1", 53, ""}, "1.1.1.1:53", "udp://1.1.1.1:53"},
		{"udp://[fe80::1%25eth0]:53", Address{"udp", "fe80::1%eth0", 53, ""}, "[fe80::1%eth0]:53", "udp://[fe80::1%25eth0]:53"},
		{"tls://dns.quad9.net:853", Address{"tls", "dns.quad9.net", 853, ""}, "dns.quad9.net:853", "tls://dns.quad9.net:853"},
		{"tls://DNS.Quad9.net:853", Address{"tls", "dns.quad9.net", 853, ""}, "dns.quad9.net:853", "tls://dns.quad9.net:853"},
		{"tls://9.9.9.9:853", Address{"tls", "9.9.9.9", 853, ""}, "9.9.9.9:853", "tls://9.9.9.9:853"},
		{"tls://dns.quad9.net", Address{"tls", "dns.quad9.net", 853, ""}, "dns.quad9.net:853", "tls://dns.quad9.net:853"}, // RFC 7858's port
		{"tls://[2620:fe::fe]", Address{"tls", "2620:fe::fe", 853, ""}, "[2620:fe::fe]:853", "tls://[2620:fe::fe]:853"},
		{"https://dns.quad9.net/dns-query", Address{"https", "dns.quad9.net", 443, "/dns-query"}, "dns.quad9.net:443", "https://dns.quad9.net/dns-query"},
		{"https://[2620:fe::fe]:8443/", Address{"https", "2620:fe::fe", 8443, "/"}, "[2620:fe::fe]:8443", "https://[2620:fe::fe]:8443/"},
		{"https://doh.example/a%20b", Address{"https", "doh.example", 443, "/a%20b"}, "doh.example:443", "https://doh.example/a%20b"},
		{"https://DNS.quad9.net:443/dns-query", Address{"https", "dns.quad9.net", 443, "/dns-query"}, "dns.quad9.net:443", "https://dns.quad9.net/dns-query"},
		{"https://[2620:fe::fe]/q", Address{"https", "2620:fe::fe", 443, "/q"}, "[2620:fe::fe]:443", "https://[2620:fe::fe]/q"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseAddress(tt.in)
			if err != nil {
				t.Fatalf("ParseAddress(%q) = %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseAddress(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if hp := got.HostPort(); hp != tt.hostPort {
				t.Errorf("HostPort() = %q, want %q", hp, tt.hostPort)
			}
			if s := got.String(); s != tt.str {
				t.Errorf("String() = %q, want %q", s, tt.str)
			}
			if again, err := ParseAddress(got.String()); err != nil || again != got {
				t.Errorf("String() does not parse back: %+v, %v", again, err)
			}
		})
	}
}

func TestParseAddressRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"",
		"9.9.9.9:53",                     // no scheme
		"udp:9.9.9.9:53",                 // no //
		"quic://9.9.9.9:853",             // unknown scheme
		"udp://dns.quad9.net:53",         // udp needs an IP literal
		"tcp://9.9.9.9",                  // tcp needs a port
		"udp://9.9.9.9:0",                // port 0
		"udp://9.9.9.9:65536",            // port too large
		"udp://9.9.9.9:x",                // port not a number
		"udp://::1:53",                   // IPv6 without brackets
		"udp://9.9.9.9:53/",              // path without https
		"tls://dns.quad9.net:853/x",      // path without https
		"tls://-bad-.example:853",        // hostname label with edge hyphens
		"tls://dns_quad9.net:853",        // underscore is no hostname
		"tls://9.9.9.999:853",            // mistyped IP, not a name
		"tls://dns.quad9.net.:853",       // trailing dot is no TLS name
		"https://dns.quad9.net",          // https needs a path
		"https://dns.quad9.net:0/x",      // port 0
		"https://u:p@dns.quad9.net/x",    // user info
		"https://dns.quad9.net/x?dns=1",  // query
		"https://dns.quad9.net/x#frag",   // fragment
		"https:///dns-query",             // no host
		"https://[2620:fe::fe/dns-query", // unbalanced bracket
	} {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			a, err := ParseAddress(in)
			var ae *AddressError
			if !errors.As(err, &ae) {
				t.Fatalf("ParseAddress(%q) = %+v, %v; want an *AddressError", in, a, err)
			}
			if ae.Address != RedactAddress(in) || ae.Reason == "" {
				t.Errorf("error %+v does not name the address (redacted) and the reason", ae)
			}
			if a != (Address{}) {
				t.Errorf("ParseAddress(%q) returned %+v along with its error", in, a)
			}
		})
	}
}

// What may be a secret in an upstream address never reaches an error, a
// log or the health API (issue 16): a DoH path often names an account
// (NextDNS's does), and a refused address with a password printed it.
// Before the fix both were shown as written.
func TestRedactAddress(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"udp://9.9.9.9:53", "udp://9.9.9.9:53"},
		{"tls://dns.quad9.net:853", "tls://dns.quad9.net:853"},
		{"https://dns.quad9.net/dns-query", "https://dns.quad9.net/dns-query"},
		{"https://[2620:fe::fe]:8443/", "https://[2620:fe::fe]:8443/"},
		{"https://dns.nextdns.io/abc123", "https://dns.nextdns.io/…"},
		{"https://d.adguard-dns.com/dns-query/abcd1234", "https://d.adguard-dns.com/…"},
		{"https://doh.example:8443/a/b?c=d#e", "https://doh.example:8443/…"},
		{"https://user:hunter2@doh.example/x", "https://…@doh.example/…"},
		{"https://user:hunter2@doh.example/dns-query", "https://…@doh.example/dns-query"},
		{"https://doh.example?token=hunter2", "https://doh.example/…"},
		{"dns.nextdns.io/abc123", "dns.nextdns.io/…"},
		{"user:hunter2@9.9.9.9:53", "…@9.9.9.9:53"},
		{"", ""},
	} {
		if got := RedactAddress(tt.in); got != tt.want {
			t.Errorf("RedactAddress(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	a, err := ParseAddress("https://DNS.NextDNS.io:443/abc123")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.Redacted(), "https://dns.nextdns.io/…"; got != want {
		t.Errorf("Redacted() = %q, want %q", got, want)
	}
	for _, in := range []string{
		"https://user:hunter2@dns.example/abc123", // user info is refused
		"https://dns.example:99999/abc123",        // bad port
		"https://dns.example/abc123?hunter2",      // query is refused
		"https://dns.example/abc123#hunter2",      // fragment is refused
		"quic://dns.example/abc123",               // unknown scheme
		"https://dns_example/abc123",              // bad host
	} {
		_, err := ParseAddress(in)
		if err == nil {
			t.Fatalf("ParseAddress(%q) did not fail", in)
		}
		if msg := err.Error(); strings.Contains(msg, "hunter2") || strings.Contains(msg, "abc123") {
			t.Errorf("ParseAddress(%q): %q shows a secret", in, msg)
		}
	}
}

func TestAddressIsTLS(t *testing.T) {
	t.Parallel()
	for scheme, want := range map[string]bool{"udp": false, "tcp": false, "tls": true, "https": true} {
		if got := (Address{scheme: scheme}).IsTLS(); got != want {
			t.Errorf("Address{scheme: %q}.IsTLS() = %v, want %v", scheme, got, want)
		}
	}
}

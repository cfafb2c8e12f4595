package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Address is a parsed upstreams[i].address.
type Address struct {
	Scheme string // "udp", "tcp", "tls" or "https"
	Host   string // udp/tcp: an IP; tls/https: a lower-case hostname or an IP. IPv6 without brackets.
	Port   string // always set: https without a port gets "443"
	Path   string // https only: the escaped request path, at least "/"
}

// HostPort is Host and Port joined for dialing, IPv6 in brackets.
func (a Address) HostPort() string { return net.JoinHostPort(a.Host, a.Port) }

// String is the address in its canonical written form; ParseAddress reads
// it back to the same Address. An IPv6 zone's "%" is escaped as the URL
// syntax requires ("[fe80::1%25eth0]").
func (a Address) String() string {
	return a.Scheme + "://" + strings.ReplaceAll(a.HostPort(), "%", "%25") + a.Path
}

// IsTLS reports whether the transport is encrypted, which is when the ip and
// ca_file keys apply.
func (a Address) IsTLS() bool { return a.Scheme == "tls" || a.Scheme == "https" }

// AddressError says why an upstream address does not parse.
type AddressError struct {
	Address string // as written
	Reason  string
}

// Error names the address and the reason.
func (e *AddressError) Error() string {
	return fmt.Sprintf("invalid upstream address %q: %s", e.Address, e.Reason)
}

// ParseAddress parses an upstream address in one of the forms of spec
// section 2:
//
//	udp://IP:PORT      IP literal, IPv6 in brackets
//	tcp://IP:PORT
//	tls://HOST:PORT    HOST a hostname or an IP literal
//	https://HOST[:PORT]/PATH
//
// The port is required except for https (default 443) and must be in
// 1..65535. User info, queries and fragments are refused. A failure is an
// *AddressError.
func ParseAddress(s string) (Address, error) {
	fail := func(format string, args ...any) (Address, error) {
		return Address{}, &AddressError{Address: s, Reason: fmt.Sprintf(format, args...)}
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			return fail("%v", ue.Err)
		}
		return fail("%v", err)
	case u.Scheme == "" || u.Opaque != "" || u.Host == "":
		return fail("want scheme://host, e.g. udp://9.9.9.9:53")
	case u.User != nil:
		return fail("user info is not allowed")
	case u.RawQuery != "" || u.ForceQuery:
		return fail("a query is not allowed")
	case u.Fragment != "":
		return fail("a fragment is not allowed")
	}

	a := Address{Scheme: u.Scheme}
	switch u.Scheme {
	case "udp", "tcp":
		// netip, unlike url, refuses an IPv6 literal without brackets,
		// where the port would be ambiguous.
		ap, err := netip.ParseAddrPort(u.Host)
		if err != nil {
			return fail("want %s://IP:PORT with an IP literal (IPv6 in brackets)", u.Scheme)
		}
		if ap.Port() == 0 {
			return fail("port must be in 1..65535")
		}
		a.Host, a.Port = ap.Addr().String(), strconv.Itoa(int(ap.Port()))
	case "tls", "https":
		host, port := u.Hostname(), u.Port()
		if ip, err := netip.ParseAddr(host); err == nil {
			if ip.Is6() && !strings.HasPrefix(u.Host, "[") {
				return fail("an IPv6 host must be in brackets")
			}
			a.Host = ip.String()
		} else if isHostname(host) {
			a.Host = strings.ToLower(host)
		} else {
			return fail("host %q is neither a hostname nor an IP", host)
		}
		if port == "" && u.Scheme == "https" {
			port = "443"
		}
		if port == "" {
			return fail("want tls://HOST:PORT, e.g. tls://dns.quad9.net:853")
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return fail("port must be in 1..65535")
		}
		a.Port = strconv.Itoa(n)
	default:
		return fail("unknown scheme %q: want udp, tcp, tls or https", u.Scheme)
	}

	switch {
	case u.Scheme == "https" && u.Path == "":
		return fail("want https://HOST/PATH, e.g. https://dns.quad9.net/dns-query")
	case u.Scheme != "https" && u.Path != "":
		return fail("a path is allowed only with https")
	}
	a.Path = u.EscapedPath()
	return a, nil
}

// isHostname reports whether s is a hostname usable as a TLS server name:
// dot-separated labels of letters, digits and inner hyphens (RFC 1123), no
// trailing dot, and a last label that is not all digits, so that a mistyped
// IPv4 address such as 9.9.9.999 is not taken for a name.
func isHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return strings.Trim(labels[len(labels)-1], "0123456789") != ""
}

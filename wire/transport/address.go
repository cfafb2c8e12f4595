package transport

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Address is a parsed upstream address, what NewTransport connects to. The
// only way to make one is ParseAddress, so an Address is either the zero
// value or valid: the transports take it as it is and parse nothing again.
// Addresses are comparable.
type Address struct {
	scheme string // "udp", "tcp", "tls" or "https"
	host   string // udp/tcp: an IP; tls/https: a lower-case hostname or an IP. IPv6 without brackets.
	port   uint16 // never 0 in a parsed address: tls without a port gets 853, https 443
	path   string // https only: the escaped request path, at least "/"
}

// Ports of tls:// and https:// addresses written without one: DNS over
// TLS's (RFC 7858 section 3.1) and HTTPS's.
const (
	defaultTLSPort   = 853
	defaultHTTPSPort = 443
)

// Scheme is "udp", "tcp", "tls" or "https"; "" for the zero Address.
func (a Address) Scheme() string { return a.scheme }

// Host is the server: an IP literal for udp and tcp (IPv6 without
// brackets, with its zone if any), a lower-case hostname or an IP literal
// for tls and https, which is the name the server's certificate must carry.
func (a Address) Host() string { return a.host }

// Port is the server's port, in 1..65535 (0 for the zero Address).
func (a Address) Port() uint16 { return a.port }

// Path is the escaped request path of an https address, at least "/"; ""
// for the other schemes.
func (a Address) Path() string { return a.path }

// HostPort is Host and Port joined for dialing, IPv6 in brackets.
func (a Address) HostPort() string { return net.JoinHostPort(a.host, strconv.Itoa(int(a.port))) }

// String is the address in its canonical written form, which ParseAddress
// reads back to the same Address: the scheme and a hostname lower-case, an
// IP in its canonical form, an https address's port left out when it is
// 443. An IPv6 zone's "%" is escaped as the URL syntax requires
// ("[fe80::1%25eth0]").
func (a Address) String() string {
	if a.scheme == "" {
		return ""
	}
	hostport := a.HostPort()
	if a.scheme == "https" && a.port == defaultHTTPSPort {
		hostport = a.host
		if strings.Contains(a.host, ":") {
			hostport = "[" + a.host + "]"
		}
	}
	return a.scheme + "://" + strings.ReplaceAll(hostport, "%", "%25") + a.path
}

// Redacted is String with what may be a secret hidden, as RedactAddress
// hides it: the form for logs, errors, metrics and the health API.
func (a Address) Redacted() string { return RedactAddress(a.String()) }

// keptDoHPath is the one path an https address shows unredacted: RFC 8484's
// own example, which public resolvers serve and which is nobody's secret.
const keptDoHPath = "/dns-query"

// RedactAddress returns an upstream address as written, parsed or not,
// with what may be a secret hidden: user info (a password) becomes "…@",
// and any path but "/" and "/dns-query", with a query or fragment, becomes
// "/…". A DoH provider's path often names an account, and knowing it is
// using it ("https://dns.nextdns.io/abc123" becomes
// "https://dns.nextdns.io/…"). The scheme and host stay, to tell
// upstreams apart.
func RedactAddress(s string) string {
	scheme, rest := "", s
	if i := strings.Index(s, "://"); i >= 0 {
		scheme, rest = s[:i+len("://")], s[i+len("://"):]
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = "…@" + authority[i+1:]
	}
	if tail != "" && tail != "/" && tail != keptDoHPath {
		tail = "/…"
	}
	return scheme + authority + tail
}

// IsTLS reports whether the transport is encrypted, which is when
// WithDialIP and WithRootCAs (the ip and ca_file keys) apply.
func (a Address) IsTLS() bool { return a.scheme == "tls" || a.scheme == "https" }

// AddressError says why an upstream address does not parse.
type AddressError struct {
	Address string // as written, redacted (see RedactAddress): errors are logged
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
//	tls://HOST[:PORT]  HOST a hostname or an IP literal
//	https://HOST[:PORT]/PATH
//
// The scheme is matched without regard to case. The port is required
// for udp and tcp; tls defaults to 853 and https to 443. It must be in
// 1..65535. User info,
// queries and fragments are refused. A failure is an *AddressError and
// the zero Address, naming the address redacted.
func ParseAddress(s string) (Address, error) {
	fail := func(format string, args ...any) (Address, error) {
		return Address{}, &AddressError{Address: RedactAddress(s), Reason: fmt.Sprintf(format, args...)}
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

	a := Address{scheme: u.Scheme}
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
		a.host, a.port = ap.Addr().String(), ap.Port()
	case "tls", "https":
		host, port := u.Hostname(), u.Port()
		if ip, err := netip.ParseAddr(host); err == nil {
			if ip.Is6() && !strings.HasPrefix(u.Host, "[") {
				return fail("an IPv6 host must be in brackets")
			}
			a.host = ip.String()
		} else if isHostname(host) {
			a.host = strings.ToLower(host)
		} else {
			return fail("host %q is neither a hostname nor an IP", host)
		}
		if port == "" {
			port = strconv.Itoa(defaultTLSPort)
			if u.Scheme == "https" {
				port = strconv.Itoa(defaultHTTPSPort)
			}
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return fail("port must be in 1..65535")
		}
		a.port = uint16(n)
	default:
		return fail("unknown scheme %q: want udp, tcp, tls or https", u.Scheme)
	}

	switch {
	case u.Scheme == "https" && u.Path == "":
		return fail("want https://HOST/PATH, e.g. https://dns.quad9.net/dns-query")
	case u.Scheme != "https" && u.Path != "":
		return fail("a path is allowed only with https")
	}
	a.path = u.EscapedPath()
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

package auth

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// safeMethod reports whether a request with method reads only: GET and
// HEAD. Every other method is taken to change state (POST and DELETE,
// and PUT or PATCH should an endpoint ever take them): it must come from
// the admin API's own origin, and a read token may not send it.
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead
}

// crossOrigin reports whether r comes from a page of another origin. A
// browser names the page's origin in Origin on every request that is not
// a GET or HEAD; a script (curl, Home Assistant) sends none and is judged
// by its credentials alone. Without Origin, a browser's Sec-Fetch-Site
// still tells a cross-site request.
func crossOrigin(r *http.Request) bool {
	switch origins := r.Header.Values("Origin"); len(origins) {
	case 0:
		site := r.Header.Get("Sec-Fetch-Site")
		return site == "cross-site" || site == "same-site"
	case 1:
		return !sameOrigin(origins[0], r)
	default:
		return true
	}
}

// sameOrigin reports whether origin (an Origin header) is the origin r
// was sent to: the same scheme, host and port (RFC 6454), the host as r's
// Host header names it. "null", a page without an origin of its own (a
// sandboxed frame, a file), is another origin.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if !strings.EqualFold(u.Scheme, scheme) {
		return false
	}
	oh, op := splitHostPort(u.Host, scheme)
	rh, rp := splitHostPort(r.Host, scheme)
	return oh != "" && strings.EqualFold(oh, rh) && op == rp
}

// splitHostPort splits an authority into its host (without brackets) and
// its port, the scheme's default when it names none.
func splitHostPort(authority, scheme string) (host, port string) {
	host, port, err := net.SplitHostPort(authority)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(authority, "["), "]"), ""
	}
	if port == "" {
		port = "80"
		if scheme == "https" {
			port = "443"
		}
	}
	return host, port
}

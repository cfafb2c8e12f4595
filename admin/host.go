package admin

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The Host check (spec section 13): a web page a browser on the LAN opens
// can point a name of its own at the admin listener's address (DNS
// rebinding) and read the answers as same-origin, the query history
// among them. Such a request carries the page's name in its Host header;
// one that names this listener does not. So the admin API answers only a
// Host, with or without a port, that is
//
//   - an IP of the connection's own end (the listener's address; on a
//     wildcard listener, whichever address of the machine the client
//     reached, which is what a Kubernetes probe or a scraper by IP sends),
//   - a loopback IP (127.0.0.0/8, ::1: an address only this machine
//     reaches, as a container's published 127.0.0.1 port is),
//   - localhost, or
//   - a name (or IP) of admin.hosts,
//
// and everything else, a missing Host included, gets 421 Misdirected
// Request. An IP literal can never be rebound; names are compared without
// case and a trailing dot. /livez and /readyz are exempt: they tell one
// word of state, and a probe through a proxy or a NAT that sends a name of
// its own keeps working.

// hostSet is what a Host may name beside the connection's local IP,
// loopback and localhost: admin.hosts, normalised.
type hostSet struct {
	names map[string]bool
	ips   map[netip.Addr]bool
}

func newHostSet(hosts []string) hostSet {
	hs := hostSet{names: map[string]bool{}, ips: map[netip.Addr]bool{}}
	for _, h := range hosts {
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		if ip, err := netip.ParseAddr(h); err == nil {
			hs.ips[ip.Unmap()] = true
		} else {
			hs.names[normalHost(h)] = true
		}
	}
	return hs
}

func normalHost(h string) string { return strings.ToLower(strings.TrimSuffix(h, ".")) }

// allows reports whether host, a request's Host header, names the
// listener whose end of the connection is local (nil when unknown).
func (hs hostSet) allows(host string, local net.Addr) bool {
	h := hostOnly(host)
	if h == "" {
		return false
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		ip = ip.Unmap()
		if ip.IsLoopback() || hs.ips[ip] {
			return true
		}
		if ap, err := netip.ParseAddrPort(addrString(local)); err == nil {
			return ap.Addr().Unmap() == ip
		}
		return false
	}
	h = normalHost(h)
	return h == "localhost" || hs.names[h]
}

// hostOnly is host without its port and an IPv6 literal's brackets.
func hostOnly(host string) string {
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return ""
		}
		rest := host[end+1:]
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return ""
		}
		return host[1:end]
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	if strings.Contains(host, ":") { // an IPv6 literal needs its brackets
		return ""
	}
	return host
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// hostExempt are the paths answered whatever the Host.
var hostExempt = map[string]bool{"/livez": true, "/readyz": true}

// checkHost answers 421 to a request whose Host does not name the
// listener (see above), and passes the others to next.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if !hostExempt[r.URL.Path] && !s.hosts.allows(r.Host, local) {
			http.Error(w, "421 misdirected request: the Host header does not name this admin listener (its address, localhost or a name of admin.hosts)", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

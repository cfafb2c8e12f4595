package admin

import (
	"net/http"
	"net/netip"
	"testing"
)

// A client outside server.allow gets 403 from every endpoint of the admin
// API; one inside is served.
func TestAdminAllow(t *testing.T) {
	t.Parallel()
	var asked netip.Addr
	deny := startWith(t, Config{Allow: func(a netip.Addr) bool { asked = a; return false }})
	for _, path := range []string{"/metrics", "/api/health", "/api/queries", "/", "/livez"} {
		if resp, _ := get(t, http.MethodGet, deny+path); resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s from outside: %d, want 403", path, resp.StatusCode)
		}
	}
	if asked != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("Allow was asked about %v, want the client 127.0.0.1", asked)
	}
	allow := startWith(t, Config{Allow: func(netip.Addr) bool { return true }})
	if resp, _ := get(t, http.MethodGet, allow+"/livez"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /livez from inside: %d, want 200", resp.StatusCode)
	}
}

package admin

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// getHost sends GET url with the Host header host and returns the status.
func getHost(tb testing.TB, url, host string) int {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// DNS rebinding (issue 25, spec section 13): a request whose Host is a
// name of another site's, as a rebound page's is, gets 421 from every
// endpoint but the probes; the listener's own address, loopback,
// localhost and the names of admin.hosts are served, with or without a
// port. Fails before the check: evil.example got 200 with the history.
func TestAdminHostCheck(t *testing.T) {
	t.Parallel()
	base := startWith(t, Config{Queries: fakeQueries{n: 1}, Hosts: []string{"nxdns.lan", "192.0.2.53", "fd00::53"}})
	port := base[strings.LastIndexByte(base, ':')+1:]

	for _, path := range []string{"/", "/api/queries", "/api/health", "/api/stats", "/metrics", "/nonexistent"} {
		for _, host := range []string{"evil.example", "evil.example:" + port, "nxdns.lan.evil.example", "localhost.evil.example",
			"192.0.2.1", "[2001:db8::1]:" + port, "192.0.2.53.nip.io"} {
			if code := getHost(t, base+path, host); code != http.StatusMisdirectedRequest {
				t.Errorf("GET %s, Host %s: %d, want 421", path, host, code)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "127.0.0.1", "localhost", "LocalHost:" + port, "localhost.",
		"[::1]", "[::1]:" + port, "127.0.0.2:" + port,
		"nxdns.lan", "NXDNS.lan.:" + port, "192.0.2.53:80", "[fd00::53]:" + port} {
		if code := getHost(t, base+"/api/queries", host); code != http.StatusOK {
			t.Errorf("GET /api/queries, Host %s: %d, want 200", host, code)
		}
	}
	// The probes answer whatever the Host: a probe through a proxy sends
	// a name of its own.
	for _, path := range []string{"/livez", "/readyz"} {
		if code := getHost(t, base+path, "evil.example"); code == http.StatusMisdirectedRequest {
			t.Errorf("GET %s, Host evil.example: 421, want the probe's answer", path)
		}
	}
	// Without admin.hosts, its names are refused like any other.
	plain := startWith(t, Config{})
	if code := getHost(t, plain+"/metrics", "nxdns.lan"); code != http.StatusMisdirectedRequest {
		t.Errorf("GET /metrics, Host nxdns.lan without admin.hosts: %d, want 421", code)
	}

	// HTTP/1.0 without a Host header names nothing.
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second)) // a wedged server fails the test instead of hanging it
	if _, err := io.WriteString(c, "GET /api/queries HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("HTTP/1.0 without Host: %d, want 421", resp.StatusCode)
	}
}

// On a wildcard listener (0.0.0.0:8053) the connection's local address
// is whichever of the machine's addresses the client reached: a Host of
// that address is the listener's, another machine's is not.
func TestHostSetAllows(t *testing.T) {
	t.Parallel()
	hs := newHostSet([]string{"nxdns.lan.", "[fd00::53]", "Router"})
	local := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 8053}
	local6 := &net.TCPAddr{IP: net.ParseIP("2001:db8::53"), Port: 8053}
	for _, tc := range []struct {
		host  string
		local net.Addr
		want  bool
	}{
		{"10.1.2.3:8053", local, true},
		{"10.1.2.3", local, true},
		{"10.1.2.4:8053", local, false},
		{"10.1.2.3:8053", nil, false},
		{"[2001:db8::53]:8053", local6, true},
		{"[2001:db8::54]:8053", local6, false},
		{"[::ffff:10.1.2.3]:8053", local, true},
		{"127.0.0.1:8053", local, true},
		{"[::1]", local, true},
		{"localhost:8053", local, true},
		{"nxdns.lan", local, true},
		{"router:8053", local, true},
		{"[fd00::53]", local, true},
		{"fd00::53", local, false}, // an IPv6 Host needs its brackets
		{"[fd00::53", local, false},
		{"[fd00::53]x", local, false},
		{"", local, false},
		{":8053", local, false},
		{"evil.example", local, false},
		{"10.1.2.3.evil.example", local, false},
	} {
		if got := hs.allows(tc.host, tc.local); got != tc.want {
			t.Errorf("allows(%q, %v) = %v, want %v", tc.host, tc.local, got, tc.want)
		}
	}
}

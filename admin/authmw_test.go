package admin

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/admin/admintest"
	"github.com/nxdnsd/nxdnsd/admin/auth"
	"github.com/nxdnsd/nxdnsd/metrics"
)

const (
	testPassword   = "correct horse battery staple"
	testReadToken  = "read-0123456789abcdef"
	testAdminToken = "admin-0123456789abcdef"
)

// minHash is a bcrypt hash at the least cost: the tests' logins cost
// microseconds, and are checked as any other.
func minHash(tb testing.TB, pw string) string {
	tb.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		tb.Fatal(err)
	}
	return string(h)
}

// testClock is an injected clock for sessions and throttling.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// authAPI is an admin server with a password and a read and an admin
// token, on a real loopback listener.
type authAPI struct {
	base   string
	client *http.Client
	clock  *testClock
}

func startAuth(tb testing.TB, cfg Config) *authAPI {
	tb.Helper()
	c := &testClock{t: t0}
	if cfg.Auth.PasswordHash == "" {
		cfg.Auth = AuthConfig{
			PasswordHash: minHash(tb, testPassword),
			Tokens: []auth.Token{
				{Name: "grafana", Hash: minHash(tb, testReadToken), Role: auth.RoleRead},
				{Name: "ha", Hash: minHash(tb, testAdminToken), Role: auth.RoleAdmin},
			},
		}
	}
	cfg.Auth.Now = c.Now
	if cfg.Pool == nil {
		cfg.Pool = &fakePool{st: []actors.Status{{Name: "a", Address: "udp://192.0.2.1:53", Slots: 2}}}
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tb.Cleanup(client.CloseIdleConnections)
	return &authAPI{base: startWith(tb, cfg), client: client, clock: c}
}

func (a *authAPI) do(tb testing.TB, method, path, body string, headers ...string) (*http.Response, string) {
	tb.Helper()
	r, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		r.Header.Add(k, v)
	}
	resp, err := a.client.Do(r)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, string(b)
}

func (a *authAPI) login(tb testing.TB, pw string) *http.Response {
	tb.Helper()
	resp, _ := a.do(tb, "POST", "/api/auth/login", fmt.Sprintf(`{"password":%q}`, pw), "Content-Type: application/json")
	return resp
}

// The login sets an HttpOnly, SameSite=Strict cookie, and the cookie then
// opens /api/health and the page; without it, the API is 401 and the page
// sends the browser to the login form, served under the page's policy.
func TestAdminLoginOpensTheAPI(t *testing.T) {
	a := startAuth(t, Config{})
	resp, body := a.do(t, "GET", "/api/health", "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/api/health without a session: %d %q, want 401", resp.StatusCode, body)
	}
	resp, _ = a.do(t, "GET", "/", "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("/ without a session: %d Location %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body = a.do(t, "GET", "/login", "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != statusPagePolicy ||
		!strings.Contains(body, `type="password"`) || !strings.Contains(body, "/api/auth/login") {
		t.Errorf("/login: %d, policy %q, a form: %v", resp.StatusCode, resp.Header.Get("Content-Security-Policy"), strings.Contains(body, "password"))
	}
	for _, p := range []string{"/metrics", "/livez", "/readyz"} {
		if resp, body := a.do(t, "GET", p, ""); resp.StatusCode != 200 {
			t.Errorf("%s without a session: %d %q, want 200", p, resp.StatusCode, body)
		}
	}

	resp = a.login(t, testPassword)
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == auth.CookieName {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusNoContent || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: %d, cookie %+v; want 204 and an HttpOnly SameSite=Strict cookie", resp.StatusCode, cookie)
	}
	session := "Cookie: " + cookie.Name + "=" + cookie.Value
	resp, body = a.do(t, "GET", "/api/health", "", session)
	if resp.StatusCode != 200 {
		t.Fatalf("/api/health with the session: %d %q", resp.StatusCode, body)
	}
	admintest.RequireHealth(t, resp.StatusCode, []byte(body))
	if resp, body := a.do(t, "GET", "/", "", session); resp.StatusCode != 200 || !strings.Contains(body, "<title>nxdnsd</title>") {
		t.Errorf("/ with the session: %d", resp.StatusCode)
	}
	if resp, _ := a.do(t, "POST", "/api/auth/logout", "", session); resp.StatusCode != http.StatusNoContent {
		t.Errorf("logout: %d", resp.StatusCode)
	}
	if resp, _ := a.do(t, "GET", "/api/health", "", session); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/api/health after the logout: %d, want 401", resp.StatusCode)
	}
}

// A wrong password is 401; the sixth attempt within the minute is 429,
// the right password included, until the minute is over.
func TestAdminLoginThrottled(t *testing.T) {
	a := startAuth(t, Config{})
	for i := range auth.MaxFailures {
		if resp := a.login(t, "wrong"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i+1, resp.StatusCode)
		}
	}
	if resp := a.login(t, testPassword); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("6th attempt: %d, Retry-After %q; want 429 and 60", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	a.clock.Add(auth.ThrottleWindow)
	if resp := a.login(t, testPassword); resp.StatusCode != http.StatusNoContent {
		t.Errorf("after the minute: %d, want 204", resp.StatusCode)
	}
}

// A read token may GET and is refused POST (403); an admin token's POST
// passes the guard (and meets the route's 405: no POST endpoint yet), as
// does a session's. A POST from another origin is 403 even with a valid
// session or admin token.
func TestAdminTokensAndOrigin(t *testing.T) {
	a := startAuth(t, Config{})
	read, adm := "Authorization: Bearer "+testReadToken, "Authorization: Bearer "+testAdminToken
	resp, body := a.do(t, "GET", "/api/health", "", read)
	if resp.StatusCode != 200 {
		t.Errorf("read token GET: %d %q", resp.StatusCode, body)
	}
	if resp, body := a.do(t, "POST", "/api/health", "", read); resp.StatusCode != http.StatusForbidden {
		t.Errorf("read token POST: %d %q, want 403", resp.StatusCode, body)
	}
	if resp, body := a.do(t, "POST", "/api/health", "", adm); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("admin token POST: %d %q, want the route's 405", resp.StatusCode, body)
	}
	if resp, body := a.do(t, "GET", "/api/stats", "", "Authorization: Bearer nope"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unknown token: %d %q, want 401", resp.StatusCode, body)
	}

	resp = a.login(t, testPassword)
	session := "Cookie: " + resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value
	self := "Origin: " + a.base
	for _, cred := range []string{session, adm} {
		if resp, body := a.do(t, "POST", "/api/health", "", cred, self); resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("same-origin POST (%.6s): %d %q, want the route's 405", cred, resp.StatusCode, body)
		}
		for _, o := range []string{"Origin: http://evil.example", "Origin: " + strings.Replace(a.base, "http:", "https:", 1), "Origin: null"} {
			for _, m := range []string{"POST", "DELETE"} {
				if resp, body := a.do(t, m, "/api/health", "", cred, o); resp.StatusCode != http.StatusForbidden {
					t.Errorf("%s with %.6s and %s: %d %q, want 403", m, cred, o, resp.StatusCode, body)
				}
			}
		}
	}
}

// Every request passes server.allow before the guard: a client outside
// it is refused 403 without its password being checked.
func TestAdminAllowBeforeLogin(t *testing.T) {
	a := startAuth(t, Config{Allow: func(netip.Addr) bool { return false }})
	for range auth.MaxFailures + 1 {
		if resp := a.login(t, "wrong"); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("login from outside server.allow: %d, want 403", resp.StatusCode)
		}
	}
}

// Whether admin.listen is loopback decides the rule without a password.
// The listener here is loopback (httptest); the server is built for a
// LAN address, which is all the decision reads.
func TestAdminLANWithoutPassword(t *testing.T) {
	const lan = "192.0.2.1:8053" // never bound
	s := New(Config{Listen: lan, Metrics: metrics.New(metrics.Config{}), Pool: &fakePool{}})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	lanGet := func(method, path string) (*http.Response, string) {
		r, _ := http.NewRequest(method, srv.URL+path, nil)
		// The Host check (host.go) compares with the connection's local
		// address, which here is httptest's loopback one.
		r.Host = srv.Listener.Addr().String()
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := lanGet("GET", "/metrics"); resp.StatusCode != 200 {
		t.Errorf("/metrics: %d %q", resp.StatusCode, body)
	}
	if resp, _ := lanGet("GET", "/livez"); resp.StatusCode != 200 {
		t.Errorf("/livez: %d", resp.StatusCode)
	}
	if resp, _ := lanGet("GET", "/readyz"); resp.StatusCode != http.StatusServiceUnavailable { // no upstream in the fake pool
		t.Errorf("/readyz: %d, want its own answer, 503", resp.StatusCode)
	}
	for _, p := range []string{"/api/health", "/", "/api/queries", "/api/stats", "/api/auth/login"} {
		method := "GET"
		if p == "/api/auth/login" {
			method = "POST"
		}
		resp, body := lanGet(method, p)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "set admin.password_hash") {
			t.Errorf("%s %s: %d %q, want 403 saying set admin.password_hash", method, p, resp.StatusCode, body)
		}
	}

	// On loopback, the same server without a password is open.
	open := startWith(t, Config{Pool: &fakePool{st: []actors.Status{{Name: "a", Address: "udp://192.0.2.1:53", Slots: 2}}}})
	if resp, body := get(t, "GET", open+"/api/health"); resp.StatusCode != 200 {
		t.Errorf("loopback without a password: /api/health %d %q", resp.StatusCode, body)
	}
}

package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	password   = "correct horse battery staple"
	readToken  = "read-token-0123456789"
	adminToken = "admin-token-0123456789"
)

// fixture is a Guard in front of a handler that answers every request
// "next METHOD PATH", served on a real loopback listener.
type fixture struct {
	url    string
	client *http.Client
	clock  *clock
	g      *Guard
}

func start(tb testing.TB, cfg Config) *fixture {
	tb.Helper()
	c := newClock()
	cfg.Now = c.Now
	g := New(cfg)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "next %s %s", r.Method, r.URL.Path)
	})
	srv := httptest.NewServer(g.Wrap(next))
	tb.Cleanup(srv.Close)
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &fixture{url: srv.URL, client: client, clock: c, g: g}
}

// withPassword is a Config with a password and a read and an admin token.
func withPassword(tb testing.TB) Config {
	return Config{
		PasswordHash: quickHash(tb, password),
		Tokens: []Token{
			{Name: "grafana", Hash: quickHash(tb, readToken), Role: RoleRead},
			{Name: "ha", Hash: quickHash(tb, adminToken), Role: RoleAdmin},
		},
		Loopback:  true,
		LoginPage: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "login page") }),
	}
}

// req is one request: headers as "Name: value" lines.
func (f *fixture) do(tb testing.TB, method, path, body string, headers ...string) (*http.Response, string) {
	tb.Helper()
	r, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		r.Header.Add(k, v)
	}
	resp, err := f.client.Do(r)
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

func (f *fixture) login(tb testing.TB, pw string, headers ...string) *http.Response {
	tb.Helper()
	resp, _ := f.do(tb, "POST", LoginPath, fmt.Sprintf(`{"password":%q}`, pw), headers...)
	return resp
}

// session logs in and returns the "Cookie: …" header of the session.
func (f *fixture) session(tb testing.TB) string {
	tb.Helper()
	resp := f.login(tb, password)
	if resp.StatusCode != http.StatusNoContent {
		tb.Fatalf("login: %d, want 204", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			return "Cookie: " + c.Name + "=" + c.Value
		}
	}
	tb.Fatal("login set no session cookie")
	return ""
}

func wantCode(tb testing.TB, what string, resp *http.Response, body string, code int) {
	tb.Helper()
	if resp.StatusCode != code {
		tb.Errorf("%s: %d %q, want %d", what, resp.StatusCode, body, code)
	}
}

// The login sets an HttpOnly, SameSite=Strict cookie that opens the API;
// the logout ends it, cookie or not.
func TestLoginSetsSessionCookie(t *testing.T) {
	t.Parallel()
	f := start(t, withPassword(t))
	resp, body := f.do(t, "GET", "/api/health", "")
	wantCode(t, "no session", resp, body, http.StatusUnauthorized)
	if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without WWW-Authenticate: Bearer (%q)", resp.Header.Get("WWW-Authenticate"))
	}

	resp = f.login(t, password)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	var c *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == CookieName {
			c = k
		}
	}
	if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge <= 0 || len(c.Value) != 43 {
		t.Fatalf("session cookie %+v, want HttpOnly, SameSite=Strict, Path=/, a lifetime and a 32-byte id", c)
	}
	if !strings.Contains(resp.Header.Get("Set-Cookie"), "SameSite=Strict") || !strings.Contains(resp.Header.Get("Set-Cookie"), "HttpOnly") {
		t.Errorf("Set-Cookie %q", resp.Header.Get("Set-Cookie"))
	}
	cookie := "Cookie: " + CookieName + "=" + c.Value
	resp, body = f.do(t, "GET", "/api/health", "", cookie)
	if resp.StatusCode != 200 || body != "next GET /api/health" {
		t.Errorf("with the session: %d %q", resp.StatusCode, body)
	}
	resp, body = f.do(t, "POST", "/api/rules", "", cookie)
	if resp.StatusCode != 200 || body != "next POST /api/rules" {
		t.Errorf("a POST with the session: %d %q", resp.StatusCode, body)
	}

	resp, body = f.do(t, "POST", LogoutPath, "", cookie)
	wantCode(t, "logout", resp, body, http.StatusNoContent)
	if cs := resp.Cookies(); len(cs) != 1 || cs[0].Name != CookieName || cs[0].MaxAge >= 0 {
		t.Errorf("logout's cookies %+v, want the session cookie removed", cs)
	}
	resp, body = f.do(t, "GET", "/api/health", "", cookie)
	wantCode(t, "after logout", resp, body, http.StatusUnauthorized)
	resp, body = f.do(t, "GET", LogoutPath, "", cookie)
	wantCode(t, "GET logout", resp, body, http.StatusMethodNotAllowed)

	// A session's idle time slides; its lifetime does not.
	cookie = f.session(t)
	f.clock.Add(SessionIdle - time.Minute)
	if resp, body := f.do(t, "GET", "/api/health", "", cookie); resp.StatusCode != 200 {
		t.Errorf("used just before SessionIdle: %d %q", resp.StatusCode, body)
	}
	f.clock.Add(SessionIdle)
	resp, body = f.do(t, "GET", "/api/health", "", cookie)
	wantCode(t, "unused for SessionIdle", resp, body, http.StatusUnauthorized)
}

// A wrong password is 401; after five failures within a minute, the
// client's sixth attempt is 429 with Retry-After, the right password
// included, until the minute is over.
func TestLoginThrottled(t *testing.T) {
	t.Parallel()
	f := start(t, withPassword(t))
	for i := range MaxFailures {
		if resp := f.login(t, "wrong"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, resp.StatusCode)
		}
		f.clock.Add(time.Second)
	}
	resp := f.login(t, password)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "55" {
		t.Fatalf("6th attempt: %d Retry-After %q, want 429 and 55", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Tokens from that client too.
	resp, body := f.do(t, "GET", "/api/health", "", "Authorization: Bearer "+adminToken)
	wantCode(t, "a token from the throttled client", resp, body, http.StatusTooManyRequests)

	f.clock.Add(55 * time.Second)
	if resp := f.login(t, password); resp.StatusCode != http.StatusNoContent {
		t.Errorf("once the minute is over: %d, want 204", resp.StatusCode)
	}

	resp, body = f.do(t, "POST", LoginPath, "password=x")
	wantCode(t, "not JSON", resp, body, http.StatusBadRequest)
	resp, body = f.do(t, "GET", LoginPath, "")
	wantCode(t, "GET login", resp, body, http.StatusMethodNotAllowed)
	if resp := f.login(t, strings.Repeat("x", 100)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a 100-byte password: %d, want 401", resp.StatusCode)
	}
}

// Ten wrong passwords at once are five checks and five 429s: a client
// cannot buy guesses with parallel connections.
func TestLoginThrottledConcurrently(t *testing.T) {
	t.Parallel()
	f := start(t, withPassword(t))
	codes := make(chan int, 10)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			r, err := http.NewRequest("POST", f.url+LoginPath, strings.NewReader(`{"password":"wrong"}`))
			if err != nil {
				codes <- 0
				return
			}
			resp, err := f.client.Do(r)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	n := map[int]int{}
	for c := range codes {
		n[c]++
	}
	if n[http.StatusUnauthorized] != MaxFailures || n[http.StatusTooManyRequests] != 10-MaxFailures {
		t.Errorf("answers %v, want %d × 401 and %d × 429", n, MaxFailures, 10-MaxFailures)
	}
}

// A read token may GET and not POST; an admin token may do both; a wrong
// token is 401 and counts as a failure.
func TestTokenRoles(t *testing.T) {
	t.Parallel()
	f := start(t, withPassword(t))
	for _, tc := range []struct {
		token, method string
		code          int
	}{
		{readToken, "GET", 200},
		{readToken, "HEAD", 200},
		{readToken, "POST", 403},
		{readToken, "DELETE", 403},
		{adminToken, "GET", 200},
		{adminToken, "POST", 200},
		{adminToken, "DELETE", 200},
		{"nope", "GET", 401},
	} {
		resp, body := f.do(t, tc.method, "/api/rules", "", "Authorization: Bearer "+tc.token)
		wantCode(t, tc.method+" with "+tc.token, resp, body, tc.code)
		if tc.code == 200 && tc.method != "HEAD" && body != "next "+tc.method+" /api/rules" {
			t.Errorf("%s with %s reached %q", tc.method, tc.token, body)
		}
	}
	// "Bearer" in any case, as RFC 7235 has it.
	resp, body := f.do(t, "GET", "/api/health", "", "Authorization: bearer "+readToken)
	wantCode(t, "lower-case bearer", resp, body, 200)
}

// A token that matched once is found again without a bcrypt check: with
// every hashing turn taken, it is still served at once, while a new token
// waits. The cache holds the token's SHA-256, never the token.
// Mutation: checking the hashes on every request makes the cached
// request wait for its turn and time out.
func TestTokenCacheSkipsBcrypt(t *testing.T) {
	t.Parallel()
	f := start(t, withPassword(t))
	if resp, body := f.do(t, "GET", "/api/health", "", "Authorization: Bearer "+readToken); resp.StatusCode != 200 {
		t.Fatalf("first use: %d %q", resp.StatusCode, body)
	}
	if _, ok := f.g.cache.get(sha256.Sum256([]byte(readToken))); !ok {
		t.Fatal("the token that matched is not cached by its SHA-256")
	}
	for range maxHashing {
		f.g.hashing <- struct{}{}
	}
	defer func() {
		for range maxHashing {
			<-f.g.hashing
		}
	}()
	// Without the cache this request would wait for a turn until its
	// deadline: the deadline only turns that hang into a failure.
	cached, cancelCached := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelCached()
	r, _ := http.NewRequestWithContext(cached, "GET", f.url+"/api/health", nil)
	r.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := f.client.Do(r)
	if err != nil {
		t.Fatalf("a cached token with every hashing turn taken: %v", err)
	}
	resp.Body.Close()
	wantCode(t, "cached token with no hashing turn free", resp, "", 200)

	// A new token waits for a turn: its request ends with its deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // long enough to reach the wait
	defer cancel()
	r, _ = http.NewRequestWithContext(ctx, "GET", f.url+"/api/health", nil)
	r.Header.Set("Authorization", "Bearer "+adminToken)
	if resp, err := f.client.Do(r); err == nil {
		resp.Body.Close()
		t.Errorf("an uncached token was answered %d without a hashing turn", resp.StatusCode)
	}
}

// A request that changes state from another origin is refused, a valid
// session or admin token notwithstanding; the same origin, or a client
// that names none, is served.
func TestCrossOriginRefused(t *testing.T) {
	t.Parallel()
	f := start(t, withPassword(t))
	cookie := f.session(t)
	self := f.url // http://127.0.0.1:PORT
	port := self[strings.LastIndex(self, ":")+1:]
	for _, tc := range []struct {
		name    string
		headers []string
		code    int
	}{
		{"same origin", []string{"Origin: " + self}, 200},
		{"same origin, upper case", []string{"Origin: HTTP://127.0.0.1:" + port}, 200},
		{"no Origin (a script)", nil, 200},
		{"Sec-Fetch-Site same-origin", []string{"Sec-Fetch-Site: same-origin"}, 200},
		{"another site", []string{"Origin: http://evil.example"}, 403},
		{"another port", []string{"Origin: http://127.0.0.1:1"}, 403},
		{"another scheme", []string{"Origin: https://127.0.0.1:" + port}, 403},
		{"another host, same port", []string{"Origin: http://localhost:" + port}, 403},
		{"default port", []string{"Origin: http://127.0.0.1"}, 403},
		{"null", []string{"Origin: null"}, 403},
		{"two Origins", []string{"Origin: " + self, "Origin: http://evil.example"}, 403},
		{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site: cross-site"}, 403},
		{"Sec-Fetch-Site same-site", []string{"Sec-Fetch-Site: same-site"}, 403},
	} {
		for _, cred := range []string{cookie, "Authorization: Bearer " + adminToken} {
			for _, method := range []string{"POST", "DELETE"} {
				resp, body := f.do(t, method, "/api/blocking/pause", "", append([]string{cred}, tc.headers...)...)
				wantCode(t, tc.name+" "+method+" "+cred[:6], resp, body, tc.code)
			}
		}
	}
	// The login and the logout are state changes too.
	resp := f.login(t, password, "Origin: http://evil.example")
	wantCode(t, "cross-site login", resp, "", http.StatusForbidden)
	resp, body := f.do(t, "POST", LogoutPath, "", cookie, "Origin: http://evil.example")
	wantCode(t, "cross-site logout", resp, body, http.StatusForbidden)
	// A GET from another origin is a read: its credentials decide.
	resp, body = f.do(t, "GET", "/api/health", "", cookie, "Origin: http://evil.example")
	wantCode(t, "cross-site GET", resp, body, 200)
}

// Without a password, a loopback listener serves everything to everyone
// allowed, and still refuses a state change from another origin.
func TestNoPasswordLoopback(t *testing.T) {
	t.Parallel()
	f := start(t, Config{Loopback: true})
	for _, m := range []string{"GET", "POST", "DELETE"} {
		resp, body := f.do(t, m, "/api/rules", "")
		if resp.StatusCode != 200 || body != "next "+m+" /api/rules" {
			t.Errorf("%s: %d %q", m, resp.StatusCode, body)
		}
	}
	resp, body := f.do(t, "POST", "/api/rules", "", "Origin: http://evil.example")
	wantCode(t, "cross-site POST", resp, body, http.StatusForbidden)
}

// Without a password, a listener reachable from the network serves only
// /metrics, /livez and /readyz; the rest is 403 "set
// admin.password_hash", the login included.
func TestNoPasswordExposed(t *testing.T) {
	t.Parallel()
	f := start(t, Config{Loopback: false})
	for _, p := range []string{"/metrics", "/livez", "/readyz"} {
		if resp, body := f.do(t, "GET", p, ""); resp.StatusCode != 200 || body != "next GET "+p {
			t.Errorf("GET %s: %d %q", p, resp.StatusCode, body)
		}
	}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/"}, {"GET", "/api/health"}, {"GET", "/api/queries"}, {"POST", "/api/rules"},
		{"POST", LoginPath}, {"GET", LoginPagePath}, {"GET", "/metrics/"},
	} {
		resp, body := f.do(t, tc.method, tc.path, "")
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, SetPasswordMessage) {
			t.Errorf("%s %s: %d %q, want 403 saying %q", tc.method, tc.path, resp.StatusCode, body, SetPasswordMessage)
		}
	}
	// With a password the same listener serves the dashboard to a session.
	g := start(t, Config{PasswordHash: quickHash(t, password)})
	resp, body := g.do(t, "GET", "/api/health", "", g.session(t))
	wantCode(t, "exposed with a password and a session", resp, body, 200)
	resp, body = g.do(t, "GET", "/livez", "")
	wantCode(t, "/livez without a session", resp, body, 200)
}

// With a password, GET / without a session goes to the login page, which
// sends a client with a session back; the open paths need nothing.
func TestLoginPage(t *testing.T) {
	t.Parallel()
	f := start(t, withPassword(t))
	resp, body := f.do(t, "GET", "/", "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != LoginPagePath {
		t.Errorf("GET / without a session: %d Location %q, want 303 to %s", resp.StatusCode, resp.Header.Get("Location"), LoginPagePath)
	}
	resp, body = f.do(t, "GET", LoginPagePath, "")
	if resp.StatusCode != 200 || body != "login page" {
		t.Errorf("GET /login: %d %q", resp.StatusCode, body)
	}
	resp, body = f.do(t, "POST", LoginPagePath, "")
	wantCode(t, "POST /login", resp, body, http.StatusMethodNotAllowed)
	cookie := f.session(t)
	resp, _ = f.do(t, "GET", LoginPagePath, "", cookie)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Errorf("GET /login with a session: %d Location %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body = f.do(t, "GET", "/", "", cookie)
	if resp.StatusCode != 200 || body != "next GET /" {
		t.Errorf("GET / with a session: %d %q", resp.StatusCode, body)
	}
	for _, p := range []string{"/metrics", "/livez", "/readyz"} {
		resp, body := f.do(t, "GET", p, "")
		wantCode(t, p+" without credentials", resp, body, 200)
	}
}

package admin

import (
	_ "embed"
	"net/http"
	"time"

	"github.com/nxdnsd/nxdnsd/admin/auth"
)

// AuthConfig is who may use the admin API (spec section 13, package auth):
// with a password, the dashboard needs a session and scripts a token;
// without one, a loopback admin.listen is open to every allowed client and
// any other serves only /metrics, /livez and /readyz.
type AuthConfig struct {
	PasswordHash string       // admin.password_hash: "" is none
	Tokens       []auth.Token // admin.tokens

	// Now, or nil, is the clock of sessions and throttling; tests inject
	// one.
	Now func() time.Time
}

// loginPage is the login form: self-contained like the status page, and
// served under the same policy. It posts the password with fetch, which
// the policy's connect-src 'self' allows.
//
//go:embed login.html
var loginPage []byte

func serveLoginPage(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", statusPagePolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(loginPage)
}

// withAuth puts the auth guard in front of every route of inner, after
// the server.allow check that wraps it: a client outside server.allow is
// refused before any password is checked. It returns a ServeMux routing
// every path through the guard, so that Handler hooks it in with one
// assignment. Whether admin.listen is loopback is decided once, from
// cfg.Listen.
func (s *Server) withAuth(inner *http.ServeMux) *http.ServeMux {
	g := auth.New(auth.Config{
		PasswordHash: s.cfg.Auth.PasswordHash,
		Tokens:       s.cfg.Auth.Tokens,
		Loopback:     auth.Loopback(s.cfg.Listen),
		LoginPage:    http.HandlerFunc(serveLoginPage),
		Logger:       s.log,
		Now:          s.cfg.Auth.Now,
	})
	out := http.NewServeMux()
	out.Handle("/", g.Wrap(inner))
	return out
}

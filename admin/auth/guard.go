package auth

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// The paths a Guard answers itself when a password is set.
const (
	LoginPath     = "/api/auth/login"  // POST {"password":"…"}: a session cookie
	LogoutPath    = "/api/auth/logout" // POST: the session ends
	LoginPagePath = "/login"           // GET: the login form (Config.LoginPage)
)

// SetPasswordMessage is the 403 answer of a listener reachable from the
// network without a password, to every path but the open ones.
const SetPasswordMessage = "set admin.password_hash"

// Open reports whether path is served to every allowed client whatever
// the credentials: the metrics and the probes, which a scraper and a
// supervisor read without a password (spec section 13).
func Open(path string) bool {
	return path == "/metrics" || path == "/livez" || path == "/readyz"
}

// maxHashing is how many bcrypt checks run at once. Each keeps a core
// busy for tens of milliseconds on a Raspberry Pi; with this bound, a
// flood of logins from many clients leaves the other cores to DNS.
const maxHashing = 2

// maxLoginBody bounds a login request's body: a 72-byte password, JSON
// escaped, with room to spare.
const maxLoginBody = 4 << 10

// Config is what a Guard enforces.
type Config struct {
	// PasswordHash is admin.password_hash: "" is no password. With one,
	// every path but the open ones needs a session or a token.
	PasswordHash string

	// Tokens are admin.tokens, checked only when a password is set.
	Tokens []Token

	// Loopback says that the listener is a loopback address (see
	// Loopback): without a password, every allowed client may then use
	// everything; otherwise only the open paths are served.
	Loopback bool

	// LoginPage, or nil, is served at GET /login when a password is set,
	// to a client without a session; GET / sends such a client there.
	LoginPage http.Handler

	Logger *zap.Logger      // or nil
	Now    func() time.Time // or nil: time.Now; tests inject a clock
}

// Guard enforces a Config on the requests of an http.Handler (Wrap).
// The configuration's values are validated by package config; a Guard
// built from values that were not fails closed: a password hash that does
// not parse admits no login, a token's unknown role is read.
type Guard struct {
	password    []byte // or nil: no password
	tokens      []Token
	tokenHashes [][]byte
	loopback    bool
	loginPage   http.Handler // or nil
	log         *zap.Logger  // always non-nil
	now         func() time.Time

	sessions *sessions
	throttle *throttle
	cache    tokenCache
	hashing  chan struct{} // a counting semaphore of maxHashing bcrypt checks

	mu     sync.Mutex // guards following
	checks map[checkKey]*tokenCheck
}

// New returns a Guard enforcing cfg.
func New(cfg Config) *Guard {
	g := &Guard{
		tokens:    cfg.Tokens,
		loopback:  cfg.Loopback,
		loginPage: cfg.LoginPage,
		log:       cfg.Logger,
		now:       cfg.Now,
		sessions:  newSessions(),
		throttle:  newThrottle(),
		hashing:   make(chan struct{}, maxHashing),
		checks:    make(map[checkKey]*tokenCheck),
	}
	if cfg.PasswordHash != "" {
		g.password = []byte(cfg.PasswordHash)
	}
	for _, t := range cfg.Tokens {
		g.tokenHashes = append(g.tokenHashes, []byte(t.Hash))
	}
	if g.log == nil {
		g.log = zap.NewNop()
	}
	if g.now == nil {
		g.now = time.Now
	}
	return g
}

// Wrap returns next behind the guard. In this order:
//   - a request that changes state (any method but GET and HEAD) whose
//     Origin names another origin gets 403, whoever sends it;
//   - /metrics, /livez and /readyz go to next;
//   - without a password, a loopback listener sends everything to next,
//     any other answers 403 "set admin.password_hash";
//   - with one, the Guard answers the login and logout endpoints and the
//     login page itself, and sends to next only requests with a session
//     cookie or a bearer token (a read token: GET and HEAD only), the
//     others answered 401 (GET / is sent to the login page) or, while
//     their client is throttled, 429.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.serve(w, r, next)
	})
}

func (g *Guard) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !safeMethod(r.Method) && crossOrigin(r) {
		from := "Origin " + strconv.Quote(r.Header.Get("Origin"))
		if r.Header.Get("Origin") == "" {
			from = "Sec-Fetch-Site " + r.Header.Get("Sec-Fetch-Site")
		}
		refuse(w, http.StatusForbidden, "a request that changes state must come from the admin API's own origin, not "+from)
		return
	}
	if Open(r.URL.Path) {
		next.ServeHTTP(w, r)
		return
	}
	if g.password == nil {
		if !g.loopback {
			refuse(w, http.StatusForbidden, "admin.listen is not a loopback address: "+SetPasswordMessage+
				" to use the admin API from the network (only /metrics, /livez and /readyz are served without one)")
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	switch r.URL.Path {
	case LoginPath:
		if onlyPOST(w, r) {
			g.login(w, r)
		}
		return
	case LogoutPath:
		if onlyPOST(w, r) {
			g.logout(w, r)
		}
		return
	case LoginPagePath:
		if g.loginPage != nil {
			g.serveLoginPage(w, r)
			return
		}
	}
	role, ok := g.authenticate(w, r)
	if !ok {
		return
	}
	if role != RoleAdmin && !safeMethod(r.Method) {
		refuse(w, http.StatusForbidden, "this token's role is read: GET only")
		return
	}
	next.ServeHTTP(w, r)
}

// authenticate returns the role of r's credentials: a bearer token's
// role, or admin for a live session. Otherwise it has answered r itself
// and returns false.
func (g *Guard) authenticate(w http.ResponseWriter, r *http.Request) (Role, bool) {
	if tok, ok := bearer(r); ok {
		return g.checkToken(w, r, tok)
	}
	if g.hasSession(r) {
		return RoleAdmin, true
	}
	if r.URL.Path == "/" && safeMethod(r.Method) && g.loginPage != nil {
		http.Redirect(w, r, LoginPagePath, http.StatusSeeOther)
		return "", false
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="nxdnsd"`)
	refuse(w, http.StatusUnauthorized, "log in (POST "+LoginPath+") or send Authorization: Bearer TOKEN")
	return "", false
}

func (g *Guard) hasSession(r *http.Request) bool {
	now := g.now()
	for _, c := range r.CookiesNamed(CookieName) {
		if g.sessions.use(c.Value, now) {
			return true
		}
	}
	return false
}

// bearer returns the token of r's "Authorization: Bearer TOKEN" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}
func (g *Guard) tooMany(w http.ResponseWriter, until time.Time) {
	secs := int((until.Sub(g.now()) + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	refuse(w, http.StatusTooManyRequests, fmt.Sprintf("too many failed logins or tokens from this client: try again in %d s", max(secs, 1)))
}

func onlyPOST(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodPost {
		return true
	}
	w.Header().Set("Allow", "POST")
	refuse(w, http.StatusMethodNotAllowed, "POST only")
	return false
}

// clientOf is r's client for throttling. A RemoteAddr that does not parse
// (not one from net/http's own listener) is one client with all others
// like it.
func clientOf(r *http.Request) netip.Prefix {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	return clientKey(ap.Addr())
}

// refuse answers code with a line of text saying why, as the admin API's
// other refusals do ("403 forbidden: …").
func refuse(w http.ResponseWriter, code int, why string) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, strconv.Itoa(code)+" "+strings.ToLower(http.StatusText(code))+": "+why, code)
}

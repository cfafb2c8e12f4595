package auth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"time"

	"go.uber.org/zap"
)

// verdict is the outcome of one throttled check.
type verdict struct {
	i       int       // what matched, or -1
	refused bool      // the client is throttled: nothing was checked
	until   time.Time // when refused, until when
}

// check runs fn, one or more bcrypt checks returning the index of what
// matched or -1, as a throttled attempt of client: it is refused without
// running while the client is throttled, and a miss counts as a failure.
// It holds no lock while fn runs, and waits for one of the maxHashing
// turns first; if ctx ends during that wait, it returns i -1 having
// counted nothing.
func (g *Guard) check(ctx context.Context, client netip.Prefix, fn func() int) verdict {
	if until, begun := g.throttle.begin(client, g.now()); !begun {
		return verdict{i: -1, refused: true, until: until}
	}
	select {
	case g.hashing <- struct{}{}:
	case <-ctx.Done():
		g.throttle.end(client, true, g.now()) // not a failure: nothing was checked
		return verdict{i: -1}
	}
	i := fn()
	<-g.hashing
	now := g.now()
	g.throttle.end(client, i >= 0, now)
	if i < 0 {
		if until, blocked := g.throttle.blocked(client, now); blocked {
			g.log.Warn("admin: too many failed logins and tokens; refusing this client's until the time given",
				zap.Stringer("client", client), zap.Time("until", until))
		}
	}
	return verdict{i: i}
}

func (g *Guard) login(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Password string `json:"password"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxLoginBody))
	if err := dec.Decode(&body); err != nil {
		refuse(w, http.StatusBadRequest, `the body must be {"password":"…"}`)
		return
	}
	v := g.check(r.Context(), clientOf(r), func() int {
		if checkPassword(g.password, []byte(body.Password)) {
			return 0
		}
		return -1
	})
	switch {
	case v.refused:
		g.tooMany(w, v.until)
		return
	case r.Context().Err() != nil: // the client went away
		return
	case v.i < 0:
		g.log.Info("admin: a login failed", zap.String("client", r.RemoteAddr))
		refuse(w, http.StatusUnauthorized, "wrong password")
		return
	}
	g.endSessions(r)
	sendSessionCookie(w, r, g.sessions.create(g.now()), int(SessionMax/time.Second))
}

func (g *Guard) logout(w http.ResponseWriter, r *http.Request) {
	g.endSessions(r)
	sendSessionCookie(w, r, "", -1)
}

// endSessions ends the sessions r's cookies name: a login replaces them, a
// logout ends them.
func (g *Guard) endSessions(r *http.Request) {
	for _, c := range r.CookiesNamed(CookieName) {
		g.sessions.end(c.Value)
	}
}

// sendSessionCookie answers a login or a logout: 204 with the session
// cookie set to id for maxAge seconds (a logout's "" and -1 remove it).
func sendSessionCookie(w http.ResponseWriter, r *http.Request, id string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     CookieName,
		Value:    id,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// serveLoginPage serves the login form, or sends a client that has a
// session to the dashboard.
func (g *Guard) serveLoginPage(w http.ResponseWriter, r *http.Request) {
	if !safeMethod(r.Method) {
		w.Header().Set("Allow", "GET, HEAD")
		refuse(w, http.StatusMethodNotAllowed, "GET only")
		return
	}
	if g.hasSession(r) {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	g.loginPage.ServeHTTP(w, r)
}

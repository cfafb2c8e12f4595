package auth

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/netip"
	"sync"

	"go.uber.org/zap"
)

// Role is what a bearer token may do.
type Role string

// The roles of admin.tokens.
const (
	RoleRead  Role = "read"  // GET (and HEAD) only
	RoleAdmin Role = "admin" // everything, as a session
)

// Token is one [[admin.tokens]] entry.
type Token struct {
	Name string // unique; named in the log when it is refused
	Hash string // bcrypt, as nxdnsd -hash-password prints it for the token
	Role Role
}

// maxCachedTokens bounds the token cache. Only tokens that matched a
// configured hash get in, so it holds one entry per token in use; bcrypt
// reads only a token's first 72 bytes, and the bound keeps a client that
// varies what follows them from growing it.
const maxCachedTokens = 256

// tokenCache remembers the tokens that matched, each by its SHA-256 (the
// token itself is never kept), so that a script polling every few seconds
// costs a hash and a map lookup instead of a bcrypt check (60-100 ms on a
// Raspberry Pi) per request. A failed token is not remembered: each costs
// its bcrypt checks, and the throttle allows a client MaxFailures of them
// a minute.
type tokenCache struct {
	mu sync.Mutex                // guards following
	m  map[[sha256.Size]byte]int // token's SHA-256 -> index in Guard.tokens
}

func (c *tokenCache) get(k [sha256.Size]byte) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.m[k]
	return i, ok
}

func (c *tokenCache) put(k [sha256.Size]byte, i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedTokens {
		c.m = make(map[[sha256.Size]byte]int)
	}
	c.m[k] = i
}

// checkToken returns the role of the token tok. A token that matched
// before is found by its SHA-256 at the cost of a map lookup; any other
// is checked against every configured hash, throttled like a login.
func (g *Guard) checkToken(w http.ResponseWriter, r *http.Request, tok string) (Role, bool) {
	client := clientOf(r)
	k := sha256.Sum256([]byte(tok))
	if i, ok := g.cache.get(k); ok {
		// A throttled client is refused even its good tokens, as the
		// spec says: nothing tells it which of its guesses were right.
		if until, blocked := g.throttle.blocked(client, g.now()); blocked {
			g.tooMany(w, until)
			return "", false
		}
		return g.tokens[i].roleOrRead(), true
	}
	v, ok := g.sharedTokenCheck(r.Context(), client, k, tok)
	switch {
	case !ok: // the client went away
		return "", false
	case v.refused:
		g.tooMany(w, v.until)
		return "", false
	case v.i < 0:
		g.log.Info("admin: a bearer token matched no admin.tokens", zap.String("client", r.RemoteAddr))
		w.Header().Set("WWW-Authenticate", `Bearer realm="nxdnsd", error="invalid_token"`)
		refuse(w, http.StatusUnauthorized, "the bearer token matches none of admin.tokens")
		return "", false
	}
	return g.tokens[v.i].roleOrRead(), true
}

// roleOrRead is the token's role; an unknown one (from values that were
// not validated) is the least.
func (t Token) roleOrRead() Role {
	if t.Role == RoleAdmin {
		return RoleAdmin
	}
	return RoleRead
}

// tokenCheck is the check of one token from one client, shared by every
// request that carries it while it runs: a dashboard that opens with six
// parallel requests costs one bcrypt check and one attempt of its
// client's allowance, not six (the sixth would be 429).
type tokenCheck struct {
	done chan struct{} // closed once v is set
	v    verdict
}

type checkKey struct {
	client netip.Prefix
	token  [sha256.Size]byte
}

// sharedTokenCheck returns the verdict on the token whose SHA-256 is k,
// from client: that of the check in progress for them, or of a new one.
// The check runs on a goroutine of its own, so that a request that goes
// away (false) cuts short no one else's wait; it ends on its own, after
// at most a wait for a hashing turn and the bcrypt checks.
func (g *Guard) sharedTokenCheck(ctx context.Context, client netip.Prefix, k [sha256.Size]byte, tok string) (verdict, bool) {
	key := checkKey{client, k}
	g.mu.Lock()
	c := g.checks[key]
	if c == nil {
		c = &tokenCheck{done: make(chan struct{})}
		g.checks[key] = c
		go func() {
			c.v = g.check(context.Background(), client, func() int {
				for i, h := range g.tokenHashes {
					if checkPassword(h, []byte(tok)) {
						return i
					}
				}
				return -1
			})
			if c.v.i >= 0 {
				g.cache.put(k, c.v.i) // before the check leaves the map: no request misses both
			}
			g.mu.Lock()
			delete(g.checks, key)
			g.mu.Unlock()
			close(c.done)
		}()
	}
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.v, true
	case <-ctx.Done():
		return verdict{}, false
	}
}

package auth

import (
	"crypto/sha256"
	"sync"
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

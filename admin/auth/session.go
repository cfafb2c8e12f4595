package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// Sessions of the dashboard. A session ends when it has not been used for
// SessionIdle, and at the latest SessionMax after the login: a phone that
// shows the dashboard every few days stays logged in, a browser left
// behind does not forever. They live in memory only, so a restart logs
// everyone out; the cookie's lifetime is SessionMax.
const (
	SessionIdle = 7 * 24 * time.Hour
	SessionMax  = 30 * 24 * time.Hour
)

// MaxSessions bounds the sessions kept: a household's browsers and
// phones need a few. A login past it ends the least recently used.
const MaxSessions = 64

// CookieName is the session cookie's name.
const CookieName = "nxdnsd_session"

// sessionIDBytes is a session id's length: 256 random bits, which no one
// guesses.
const sessionIDBytes = 32

// sessions are the live sessions, each kept under the SHA-256 of its id:
// the id itself is in no memory but the browser's, and looking one up
// compares hashes, so the time a lookup takes says nothing about any id.
type sessions struct {
	mu sync.Mutex // guards following
	m  map[[sha256.Size]byte]*session
}

type session struct {
	created, used time.Time
}

func newSessions() *sessions {
	return &sessions{m: make(map[[sha256.Size]byte]*session)}
}

// create starts a session at now and returns its id, the cookie's value.
func (s *sessions) create(now time.Time) string {
	var raw [sessionIDBytes]byte
	rand.Read(raw[:]) // never fails (crypto/rand: it crashes the program instead)
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= MaxSessions {
		s.evictLocked(now)
	}
	s.m[sha256.Sum256([]byte(id))] = &session{created: now, used: now}
	return id
}

// use reports whether id is a live session at now, and counts it as used.
func (s *sessions) use(id string, now time.Time) bool {
	if len(id) != base64.RawURLEncoding.EncodedLen(sessionIDBytes) {
		return false
	}
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.m[k]
	if se == nil {
		return false
	}
	if expired(se, now) {
		delete(s.m, k)
		return false
	}
	se.used = now
	return true
}

// end ends the session id, if it is one.
func (s *sessions) end(id string) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	delete(s.m, k)
	s.mu.Unlock()
}

// evictLocked drops the expired sessions, and if that freed nothing the
// least recently used.
func (s *sessions) evictLocked(now time.Time) {
	var oldest [sha256.Size]byte
	var oldestUsed time.Time
	for k, se := range s.m {
		if expired(se, now) {
			delete(s.m, k)
			continue
		}
		if oldestUsed.IsZero() || se.used.Before(oldestUsed) {
			oldest, oldestUsed = k, se.used
		}
	}
	if len(s.m) >= MaxSessions {
		delete(s.m, oldest)
	}
}

func expired(se *session, now time.Time) bool {
	return !now.Before(se.used.Add(SessionIdle)) || !now.Before(se.created.Add(SessionMax))
}

// len is how many sessions are kept, for tests.
func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

package auth

import (
	"testing"
	"time"
)

func TestSessionsExpire(t *testing.T) {
	t.Parallel()
	s := newSessions()
	t0 := newClock().Now()
	id := s.create(t0)
	if len(id) != 43 {
		t.Errorf("id %q: %d characters, want 43 (32 bytes, base64url)", id, len(id))
	}
	flipped := []byte(id)
	flipped[0] ^= 1
	if s.use(id+"x", t0) || s.use("", t0) || s.use(string(flipped), t0) {
		t.Error("a different id was taken for the session")
	}
	// Used every six days, it lives until SessionMax after the login.
	now := t0
	for now.Add(6 * 24 * time.Hour).Before(t0.Add(SessionMax)) {
		now = now.Add(6 * 24 * time.Hour)
		if !s.use(id, now) {
			t.Fatalf("expired at %v, used six days before", now.Sub(t0))
		}
	}
	if s.use(id, t0.Add(SessionMax)) {
		t.Error("alive past SessionMax")
	}
	if s.len() != 0 {
		t.Error("an expired session was kept")
	}

	idle := s.create(t0)
	if s.use(idle, t0.Add(SessionIdle)) {
		t.Error("alive after SessionIdle unused")
	}
	gone := s.create(t0)
	s.end(gone)
	if s.use(gone, t0) {
		t.Error("alive after end")
	}
}

// Past MaxSessions, a login ends the least recently used session.
func TestSessionsBounded(t *testing.T) {
	t.Parallel()
	s := newSessions()
	t0 := newClock().Now()
	ids := make([]string, MaxSessions)
	for i := range ids {
		ids[i] = s.create(t0.Add(time.Duration(i) * time.Second))
	}
	s.use(ids[0], t0.Add(time.Hour)) // the oldest login, used recently
	s.create(t0.Add(time.Hour))
	if s.len() != MaxSessions {
		t.Errorf("%d sessions, want %d", s.len(), MaxSessions)
	}
	now := t0.Add(time.Hour)
	if !s.use(ids[0], now) {
		t.Error("the recently used session was ended")
	}
	if s.use(ids[1], now) {
		t.Error("the least recently used session is still alive")
	}
}

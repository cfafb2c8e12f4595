package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
)

// Requests that carry one new token at once share its check: a dashboard
// opening six panels together gets six answers from one bcrypt check and
// one attempt of its allowance. Mutation: a check per request makes the
// sixth a 429 (five attempts in progress fill the allowance).
func TestTokenCheckShared(t *testing.T) {
	t.Parallel()
	cfg := withPassword(t)
	synctest.Test(t, func(t *testing.T) {
		g := New(cfg) // in the bubble: its channels block durably here
		h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		for range maxHashing {
			g.hashing <- struct{}{}
		}
		const n = 6
		codes := make(chan int, n)
		for range n {
			go func() {
				r := httptest.NewRequest("GET", "/api/health", nil)
				r.Header.Set("Authorization", "Bearer "+readToken)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				codes <- rec.Code
			}()
		}
		synctest.Wait() // every request waits for the check, the check for a turn
		g.mu.Lock()
		checks := len(g.checks)
		g.mu.Unlock()
		if checks != 1 {
			t.Errorf("%d checks in progress for one token, want 1", checks)
		}
		for range maxHashing {
			<-g.hashing
		}
		for range n {
			if c := <-codes; c != http.StatusOK {
				t.Errorf("answer %d, want 200 for every request", c)
			}
		}
		if f := g.throttle.clients[clientOf(httptest.NewRequest("GET", "/", nil))]; f == nil || f.pending != 0 {
			t.Errorf("the client's attempts: %+v, want one ended", f)
		}
	})
}

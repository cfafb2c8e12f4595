package actors

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// ExchangeOnly tries the upstreams it is given and no other, in either
// pass: a router's failure never sends a private reverse name to a public
// upstream (spec section 15). Mutation check: dropping the tried mask's
// initial value (tried: ^only) sends the query to u0 and u2.
func TestExchangeOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, fakes := newTestPool(t, defaults, up{fn: answering}, up{fn: refusing}, up{fn: answering})
		r := pool.ExchangeOnly(t.Context(), packed(t, query()), time.Now(), nil, 1<<1)
		if got, want := outcomes(r), []string{"u1:peer_fault"}; !slices.Equal(got, want) {
			t.Errorf("trail %v, want %v", got, want)
		}
		if r.Err == nil {
			t.Errorf("the only upstream refused, yet no error")
		}
		for _, i := range []int{0, 2} {
			if n := fakes[i].calls.Load(); n != 0 {
				t.Errorf("u%d was asked %d times, want never", i, n)
			}
		}

		r = pool.ExchangeOnly(t.Context(), packed(t, query()), time.Now(), nil, 1<<2)
		if r.Err != nil || r.Upstream != "u2" {
			t.Errorf("only u2: err %v, upstream %q; want u2's answer", r.Err, r.Upstream)
		}

		r = pool.ExchangeOnly(t.Context(), packed(t, query()), time.Now(), nil, 0)
		if len(r.Attempts) != 0 || !errors.Is(r.Err, ErrAllFailed) {
			t.Errorf("none: trail %v, err %v; want no attempt, ErrAllFailed", outcomes(r), r.Err)
		}
	})
}

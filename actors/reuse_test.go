package actors

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// A reload's pool: the kept upstream brings its health, counters and
// slots (a query of the old pool still holds one), the new upstream
// starts afresh, and closing the old pool stops only what the new one
// does not hold. Mutation check: making CloseExcept stop every upstream
// loses the new pool's outcome (the kept actor is gone) and fails the
// count of successes.
func TestNewPoolFromKeepsHandedUpstreams(t *testing.T) {
	entered := make(chan struct{})
	gate := make(chan struct{})
	held := func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
		if m.Question[0].Name == "held.example." {
			entered <- struct{}{}
			<-gate
		}
		return answering(ctx, m)
	}
	old, fakes := newTestPool(t, defaults, up{slots: 4, fn: held}, up{fn: answering})
	for range 2 {
		if r := exchange(t, old, t.Context()); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	done := make(chan Result, 1)
	go func() {
		m := new(dns.Msg)
		m.SetQuestion("held.example.", dns.TypeA)
		done <- old.Exchange(t.Context(), packed(t, m), time.Now(), nil)
	}()
	<-entered // a query of the old pool holds one of u0's slots

	added := &fakeTransport{fn: answering}
	next, err := NewPoolFrom(defaults, []Spec{
		{Name: "u0", Address: "fake", Slots: 4},
		{Name: "added", Address: "fake", Slots: 8, Transport: added},
	}, []*Upstream{old.Upstream(0), nil}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(next.Close)
	next.Sync()
	st := next.Status()
	if st[0].Name != "u0" || st[0].Successes != 2 || st[0].InFlight != 1 {
		t.Errorf("the kept upstream: successes=%d in flight=%d, want its 2 and the old pool's query", st[0].Successes, st[0].InFlight)
	}
	if st[1].Name != "added" || st[1].Successes != 0 || st[1].Slots != 8 {
		t.Errorf("the new upstream: %+v", st[1])
	}

	close(gate)
	if r := <-done; r.Err != nil || r.Upstream != "u0" {
		t.Fatalf("the old pool's query: err=%v upstream=%q", r.Err, r.Upstream)
	}
	old.CloseExcept(next) // its queries have returned
	if !next.Holds(old.Upstream(0)) || next.Holds(old.Upstream(1)) {
		t.Error("Holds: the new pool holds u0 and not u1")
	}

	// The kept actor still runs: the new pool's query is recorded by it.
	if r := exchange(t, next, t.Context()); r.Err != nil || r.Upstream != "u0" {
		t.Fatalf("through the new pool: err=%v upstream=%q", r.Err, r.Upstream)
	}
	next.Sync()
	if st := next.Status(); st[0].Successes != 4 || st[0].InFlight != 0 {
		t.Errorf("the kept upstream: successes=%d in flight=%d, want 4 (2, the old pool's, the new pool's) and 0", st[0].Successes, st[0].InFlight)
	}
	if fakes[0].calls.Load() != 4 || added.calls.Load() != 0 {
		t.Errorf("exchanges: u0 %d, added %d; want 4 and 0", fakes[0].calls.Load(), added.calls.Load())
	}
}

// The kept upstream's actor follows the new pool's health policy.
// Mutation check: without setPolicy u0 needs three failures, not one.
func TestNewPoolFromAppliesTheNewHealthPolicy(t *testing.T) {
	old, fakes := newTestPool(t, defaults, up{fn: refusing}, up{fn: answering})
	p := defaults
	p.Health.FailureThreshold = 1
	next, err := NewPoolFrom(p, []Spec{
		{Name: "u0", Address: "fake", Slots: 32},
		{Name: "u1", Address: "fake", Slots: 32, Transport: fakes[1]},
	}, []*Upstream{old.Upstream(0), nil}, nil)
	if err != nil {
		t.Fatal(err)
	}
	old.CloseExcept(next)
	t.Cleanup(next.Close)
	if r := exchange(t, next, t.Context()); r.Err != nil || r.Upstream != "u1" {
		t.Fatalf("err=%v upstream=%q, want u1's answer after u0's refusal", r.Err, r.Upstream)
	}
	next.Sync()
	if st := next.Status(); !st[0].InBackoff || st[0].Failures != 1 {
		t.Errorf("u0 after one failure: backoff=%v failures=%d, want backoff under failure_threshold 1", st[0].InBackoff, st[0].Failures)
	}
}

func TestNewPoolFromRefusesAnotherUpstream(t *testing.T) {
	old, _ := newTestPool(t, defaults, up{slots: 4, fn: answering})
	for _, tc := range []struct {
		name string
		spec Spec
		kept []*Upstream
	}{
		{"other slots", Spec{Name: "u0", Address: "fake", Slots: 5}, []*Upstream{old.Upstream(0)}},
		{"other name", Spec{Name: "x", Address: "fake", Slots: 4}, []*Upstream{old.Upstream(0)}},
		{"other address", Spec{Name: "u0", Address: "udp://192.0.2.1:53", Slots: 4}, []*Upstream{old.Upstream(0)}},
		{"kept list too short", Spec{Name: "u0", Address: "fake", Slots: 4}, nil},
	} {
		if _, err := NewPoolFrom(defaults, []Spec{tc.spec}, tc.kept, nil); err == nil || !strings.HasPrefix(err.Error(), "pool: ") {
			t.Errorf("%s: err=%v, want a pool error", tc.name, err)
		}
	}
}

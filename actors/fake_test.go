package actors

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/nxdnsd/nxdnsd/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTransport is an in-memory upstream: fn decides what each exchange
// does. calls counts exchanges that reached it.
type fakeTransport struct {
	calls atomic.Int32
	fn    func(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
}

// Exchange runs fn on the query's message under a context that ends at
// the attempt's expiry, as a message-only transport does.
func (f *fakeTransport) Exchange(ctx context.Context, q *wire.Query, expiry time.Time) (wire.Answer, error) {
	f.calls.Add(1)
	return wire.MsgFunc(f.fn).Exchange(ctx, q, expiry)
}

func answering(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
	r := new(dns.Msg)
	r.SetReply(m)
	return r, nil
}

// stalling never answers: it returns only when the attempt's context ends.
func stalling(ctx context.Context, _ *dns.Msg) (*dns.Msg, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

var errRefused = &net.OpError{Op: "read", Net: "udp", Err: syscall.ECONNREFUSED}

func refusing(context.Context, *dns.Msg) (*dns.Msg, error) { return nil, errRefused }

// after answers with fn's result after d, or returns the context's error.
func after(d time.Duration, fn func(context.Context, *dns.Msg) (*dns.Msg, error)) func(context.Context, *dns.Msg) (*dns.Msg, error) {
	return func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return fn(ctx, m)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// gated blocks every exchange until the test sends it a result on gate.
func gated(gate <-chan error) func(context.Context, *dns.Msg) (*dns.Msg, error) {
	return func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
		select {
		case err := <-gate:
			if err != nil {
				return nil, err
			}
			return answering(ctx, m)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// stubborn blocks every exchange until the test sends it a result on
// gate, ignoring the attempt's deadline: a holder that outlives any budget.
func stubborn(gate <-chan error) func(context.Context, *dns.Msg) (*dns.Msg, error) {
	return func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
		if err := <-gate; err != nil {
			return nil, err
		}
		return answering(ctx, m)
	}
}

// defaults is the shipped policy: attempt 2500 ms, total 5000 ms.
var defaults = Policy{
	AttemptTimeout: 2500 * time.Millisecond,
	TotalTimeout:   5000 * time.Millisecond,
	Health:         HealthPolicy{FailureThreshold: 3, Backoff: time.Second, BackoffMax: 30 * time.Second},
}

type up struct {
	slots int
	fn    func(context.Context, *dns.Msg) (*dns.Msg, error)
}

// newTestPool builds a pool of fake upstreams named u0, u1, … and closes
// it when the test ends.
func newTestPool(tb testing.TB, p Policy, ups ...up) (*Pool, []*fakeTransport) {
	tb.Helper()
	specs := make([]Spec, len(ups))
	fakes := make([]*fakeTransport, len(ups))
	for i, u := range ups {
		fakes[i] = &fakeTransport{fn: u.fn}
		slots := u.slots
		if slots == 0 {
			slots = 32
		}
		specs[i] = Spec{Name: "u" + string(rune('0'+i)), Address: "fake", Slots: slots, Transport: fakes[i]}
	}
	pool, err := NewPool(p, specs, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool, fakes
}

func query() *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeA)
	return m
}

// packed returns m as the pool's query.
func packed(tb testing.TB, m *dns.Msg) *wire.Query {
	tb.Helper()
	q, err := wire.NewQuery(m)
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// exchange resolves the test query through pool, arriving now.
func exchange(tb testing.TB, pool *Pool, ctx context.Context) Result {
	return pool.Exchange(ctx, packed(tb, query()), time.Now(), nil)
}

// outcomes returns a trail's (upstream, outcome) pairs for comparison.
func outcomes(r Result) []string {
	var out []string
	for _, a := range r.Attempts {
		out = append(out, a.Upstream+":"+a.Outcome.String())
	}
	return out
}

package actors

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTransport is an in-memory upstream: fn decides what each client
// exchange does, probe what each health probe (". NS") does; a nil probe
// answers. calls counts client exchanges that reached it, probes the
// probes, and probeStarts records when each probe began (fake time under
// synctest).
type fakeTransport struct {
	calls  atomic.Int32
	probes atomic.Int32
	fn     func(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
	probe  func(ctx context.Context, m *dns.Msg) (*dns.Msg, error)

	mu          sync.Mutex // guards following
	probeStarts []time.Time
}

// Exchange runs fn (or probe) on the query's message under a context that
// ends at the attempt's expiry, as a message-only transport does.
func (f *fakeTransport) Exchange(ctx context.Context, q *transport.Query, expiry time.Time) (transport.Answer, error) {
	if isProbe(q.Msg) {
		f.probes.Add(1)
		f.mu.Lock()
		f.probeStarts = append(f.probeStarts, time.Now())
		fn := f.probe
		f.mu.Unlock()
		if fn == nil {
			fn = answering
		}
		return transport.MsgFunc(fn).Exchange(ctx, q, expiry)
	}
	f.calls.Add(1)
	return transport.MsgFunc(f.fn).Exchange(ctx, q, expiry)
}

// setProbe changes what the upstream does with probes from now on.
func (f *fakeTransport) setProbe(fn func(context.Context, *dns.Msg) (*dns.Msg, error)) {
	f.mu.Lock()
	f.probe = fn
	f.mu.Unlock()
}

// started returns when each probe began, relative to t0.
func (f *fakeTransport) started(t0 time.Time) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]time.Duration, len(f.probeStarts))
	for i, t := range f.probeStarts {
		out[i] = t.Sub(t0)
	}
	return out
}

// isProbe reports whether m is the actor's health probe, ". NS".
func isProbe(m *dns.Msg) bool {
	return len(m.Question) == 1 && m.Question[0].Name == "." && m.Question[0].Qtype == dns.TypeNS
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

// defaults is the shipped policy: attempt 2500 ms, total 5000 ms, probes
// of 1000 ms.
var defaults = Policy{
	AttemptTimeout: 2500 * time.Millisecond,
	TotalTimeout:   5000 * time.Millisecond,
	Health:         HealthPolicy{FailureThreshold: 3, Backoff: time.Second, BackoffMax: 30 * time.Second, ProbeTimeout: time.Second},
}

// up is one fake upstream of a test pool: fn serves client queries, probe
// (nil: answer) the health probes.
type up struct {
	slots int
	fn    func(context.Context, *dns.Msg) (*dns.Msg, error)
	probe func(context.Context, *dns.Msg) (*dns.Msg, error)
}

// newTestPool builds a pool of fake upstreams named u0, u1, … and closes
// it when the test ends.
func newTestPool(tb testing.TB, p Policy, ups ...up) (*Pool, []*fakeTransport) {
	tb.Helper()
	specs := make([]Spec, len(ups))
	fakes := make([]*fakeTransport, len(ups))
	for i, u := range ups {
		fakes[i] = &fakeTransport{fn: u.fn, probe: u.probe}
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
func packed(tb testing.TB, m *dns.Msg) *transport.Query {
	tb.Helper()
	q, err := transport.NewQuery(m)
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

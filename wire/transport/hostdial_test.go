package transport

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// fakeResolver is a HostResolver whose lookups the test decides: resolve,
// when set, answers; otherwise the lookup waits for its context to end.
// It counts the lookups and keeps the deadline of the last one.
type fakeResolver struct {
	resolve  func(host string) (Resolved, error)
	calls    atomic.Int64
	deadline atomic.Pointer[time.Time]
	hosts    chan string // every host asked, buffered
}

func newFakeResolver(resolve func(host string) (Resolved, error)) *fakeResolver {
	return &fakeResolver{resolve: resolve, hosts: make(chan string, 16)}
}

func (r *fakeResolver) Resolve(ctx context.Context, host string) (Resolved, error) {
	r.calls.Add(1)
	if d, ok := ctx.Deadline(); ok {
		r.deadline.Store(&d)
	}
	select {
	case r.hosts <- host:
	default:
	}
	if r.resolve == nil {
		<-ctx.Done()
		return Resolved{}, ctx.Err()
	}
	return r.resolve(host)
}

// resolveTo answers every lookup with ip, due again in a minute.
func resolveTo(ip netip.Addr) func(string) (Resolved, error) {
	return func(string) (Resolved, error) {
		return Resolved{Addrs: []netip.Addr{ip}, Until: time.Now().Add(time.Minute)}, nil
	}
}

// newBootstrapped starts a DoT or DoH fake for dns.test and a transport to
// it with no ip, finding dns.test through r: the system resolver knows
// nothing of .test (RFC 6761), so an answer proves r was asked.
func newBootstrapped(tb testing.TB, scheme string, r HostResolver) (upstream func() int64, tr Transport) {
	tb.Helper()
	ca := wiretest.NewCA(tb)
	cert := ca.Certificate(tb, wiretest.TLSName)
	var address string
	if scheme == "tls" {
		srv := wiretest.NewDoTServer(tb, cert, wiretest.Answer())
		address, upstream = srv.Upstream(), srv.Accepts
	} else {
		srv := wiretest.NewDoHServer(tb, cert, wiretest.Answer())
		address, upstream = srv.Upstream(), srv.Conns
	}
	opts := []Option{WithRootCAs(ca.Pool())}
	if r != nil {
		opts = append(opts, WithResolver(r))
	}
	return upstream, newTestTransport(tb, address, opts...)
}

// A DoT or DoH upstream without ip is dialled at the address its resolver
// finds for its host, looked up once for as long as the answer lasts.
func TestBootstrappedTransportsDialTheResolvedAddress(t *testing.T) {
	t.Parallel()
	for _, scheme := range []string{"tls", "https"} {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			r := newFakeResolver(resolveTo(loopback))
			conns, tr := newBootstrapped(t, scheme, r)
			for range 5 {
				mustAnswer(t, tr, query("example.com"))
			}
			if got := <-r.hosts; got != wiretest.TLSName {
				t.Errorf("looked up %q, want %q", got, wiretest.TLSName)
			}
			if n := r.calls.Load(); n != 1 {
				t.Errorf("5 exchanges looked the host up %d times, want 1", n)
			}
			if n := conns(); n != 1 {
				t.Errorf("5 exchanges took %d connections, want 1", n)
			}
		})
	}
}

// Without ip and without a resolver, nothing is dialled — never the
// system resolver — and the error is ErrBootstrap, a local error.
func TestUnresolvableHostDialsNothing(t *testing.T) {
	t.Parallel()
	for _, scheme := range []string{"tls", "https"} {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			conns, tr := newBootstrapped(t, scheme, nil)
			_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("example.com"))
			if !errors.Is(err, ErrBootstrap) {
				t.Errorf("Exchange = %v, want ErrBootstrap", err)
			}
			if n := conns(); n != 0 {
				t.Errorf("%d connections reached the server, want 0", n)
			}
		})
	}
}

// A lookup that fails or stalls ends the exchange with ErrBootstrap, never
// with the context's error or the resolver's own (which could pass for
// the upstream's), and a stalled one is cut off half-way to the
// exchange's expiry: the attempt has not expired when it returns, so the
// pool cannot take it for the upstream's timeout.
func TestFailedLookupIsErrBootstrapBeforeTheExpiry(t *testing.T) {
	t.Parallel()
	refused := errors.New("bootstrap refused")
	for _, c := range []struct {
		name    string
		resolve func(string) (Resolved, error)
	}{
		{"stalls", nil},
		{"fails", func(string) (Resolved, error) { return Resolved{}, refused }},
		{"finds nothing", func(string) (Resolved, error) { return Resolved{Until: time.Now().Add(time.Minute)}, nil }},
	} {
		for _, scheme := range []string{"tls", "https"} {
			t.Run(c.name+"/"+scheme, func(t *testing.T) {
				t.Parallel()
				r := newFakeResolver(c.resolve)
				conns, tr := newBootstrapped(t, scheme, r)
				expiry := within(expiryTimeout)
				_, err := tr.Exchange(t.Context(), mustQuery(t, query("example.com")), expiry)
				switch {
				case !errors.Is(err, ErrBootstrap):
					t.Errorf("Exchange = %v, want ErrBootstrap", err)
				case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, refused):
					t.Errorf("Exchange = %v: the lookup's own error is in the chain", err)
				}
				if d := r.deadline.Load(); d == nil || !d.Before(expiry) {
					t.Errorf("the lookup's deadline is %v, want one before the exchange's expiry %v", d, expiry)
				}
				if n := conns(); n != 0 {
					t.Errorf("%d connections reached the server, want 0", n)
				}
			})
		}
	}
}

// The query's own cancellation during a lookup is the cancellation, not
// a bootstrap failure.
func TestCancelledLookupIsCanceled(t *testing.T) {
	t.Parallel()
	for _, scheme := range []string{"tls", "https"} {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			r := newFakeResolver(nil)
			_, tr := newBootstrapped(t, scheme, r)
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				<-r.hosts // the lookup has begun
				cancel()
			}()
			_, err := tr.Exchange(ctx, mustQuery(t, query("example.com")), within(answerTimeout))
			if !errors.Is(err, context.Canceled) || errors.Is(err, ErrBootstrap) {
				t.Errorf("Exchange = %v, want context.Canceled alone", err)
			}
		})
	}
}

// Package bootstrap looks up the host names of DoT and DoH upstreams that
// have no ip (spec section 2, upstream.bootstrap): a transport.HostResolver that
// asks its sources — the bootstrap resolvers over plain DNS, or the
// upstreams that have an ip over their own transports — and never the
// system resolver, which may be nxdnsd itself.
//
// Each host is asked for A and AAAA together, source after source until
// one gives an address, and its addresses are kept for the answer's TTL,
// clamped to MinTTL..MaxTTL. When they are due, they go on being served
// while a refresh runs in the background, and for as long as refreshes
// fail: the last good address, like a stale cache entry. A host with no
// address yet is looked up by the first exchange that needs it, the
// others waiting for that lookup; a failure is remembered for RetryAfter,
// so that the exchanges after it fail at once (a local error: the pool
// records nothing against the upstream, and fails over).
package bootstrap

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Bounds of how long addresses are kept.
const (
	// MinTTL: an upstream's addresses change seldom, and a tiny TTL would
	// put a lookup in front of every connection.
	MinTTL = 60 * time.Second
	// MaxTTL: an address is checked at least daily.
	MaxTTL = 24 * time.Hour
	// RetryAfter: a failed lookup is not repeated sooner, so that a dead
	// bootstrap costs the queries nothing but the failover.
	RetryAfter = 10 * time.Second
	// refreshTimeout bounds a background refresh, which no exchange waits
	// for.
	refreshTimeout = 5 * time.Second
)

// Source is one resolver the lookups ask.
type Source struct {
	Name      string              // in errors: the bootstrap's IP:PORT, or the upstream's name
	Exchanger transport.Exchanger // plain DNS to a bootstrap resolver, or an upstream's transport
}

// errNoSources: nothing can look a host up. Configuration validation
// refuses an upstream in that state; a Resolver without sources says so.
var errNoSources = errors.New("no bootstrap resolver and no upstream with an ip to ask")

// Resolver is the bootstrap lookup shared by every upstream without ip.
// It is safe for concurrent use; Close ends its background refreshes.
type Resolver struct {
	log     *zap.Logger
	now     func() time.Time // time.Now; tests set a clock of their own
	sources atomic.Pointer[[]Source]

	ctx    context.Context // ends at Close, and with it the refreshes
	cancel context.CancelFunc
	wg     sync.WaitGroup // background refreshes

	mu     sync.Mutex // guards following, and every entry's fields
	hosts  map[string]*entry
	closed bool
}

// entry is what is known of one host.
type entry struct {
	addrs   []netip.Addr  // the last good addresses; nil before the first
	until   time.Time     // addrs are due then; after a failure, when to ask again
	err     error         // the last lookup's failure while addrs is nil
	pending chan struct{} // or nil: closed when the lookup running for the host ends
}

var _ transport.HostResolver = (*Resolver)(nil)

// New returns a Resolver asking sources, in their order (Use replaces
// them). log hears of failed lookups; nil logs nothing.
func New(log *zap.Logger, sources []Source) *Resolver {
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Resolver{log: log, now: time.Now, ctx: ctx, cancel: cancel, hosts: make(map[string]*entry)}
	r.Use(sources)
	return r
}

// Use makes later lookups ask sources, in their order (a reload's). The
// addresses found so far are kept; failures are forgotten, so that a
// fixed configuration is tried at once.
func (r *Resolver) Use(sources []Source) {
	s := append([]Source(nil), sources...)
	r.sources.Store(&s)
	r.mu.Lock()
	for host, e := range r.hosts {
		if e.addrs == nil && e.pending == nil {
			delete(r.hosts, host)
		}
	}
	r.mu.Unlock()
}

// Sources returns the sources lookups ask now.
func (r *Resolver) Sources() []Source { return *r.sources.Load() }

// Resolve implements transport.HostResolver: host's addresses, IPv4 first, as
// the package comment describes. An address already due is returned at
// once while it is refreshed in the background, due again after
// RetryAfter. ctx bounds the wait for a lookup, and a lookup this call
// makes itself.
func (r *Resolver) Resolve(ctx context.Context, host string) (transport.Resolved, error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for {
		now := r.now()
		r.mu.Lock()
		e := r.hosts[host]
		if e == nil {
			e = &entry{}
			r.hosts[host] = e
		}
		switch {
		case e.addrs != nil:
			res := transport.Resolved{Addrs: e.addrs, Until: e.until}
			if !now.Before(e.until) {
				res.Until = now.Add(RetryAfter)
				if e.pending == nil && !r.closed {
					r.refreshLocked(host, e)
				}
			}
			r.mu.Unlock()
			return res, nil
		case e.err != nil && now.Before(e.until):
			err := e.err
			r.mu.Unlock()
			return transport.Resolved{}, err
		case e.pending != nil:
			wait := e.pending
			r.mu.Unlock()
			select {
			case <-wait:
				continue // the lookup ended: its result, or ours to try
			case <-ctx.Done():
				return transport.Resolved{}, ctx.Err()
			}
		}
		e.pending = make(chan struct{})
		r.mu.Unlock()
		res, err := r.lookup(ctx, host)
		return res, r.settle(host, e, res, err, errors.Is(ctx.Err(), context.Canceled))
	}
}

// refreshLocked starts the background refresh of host's due addresses.
// The caller holds r.mu.
func (r *Resolver) refreshLocked(host string, e *entry) {
	e.pending = make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(r.ctx, refreshTimeout)
		defer cancel()
		res, err := r.lookup(ctx, host)
		_ = r.settle(host, e, res, err, r.ctx.Err() != nil)
	}()
}

// settle records how the lookup of host that e.pending stands for ended,
// and returns err as the lookup's caller gets it. A lookup whose caller
// gave up (cancelled) says nothing about the host and records nothing; a
// failure is kept for RetryAfter, and never replaces good addresses.
func (r *Resolver) settle(host string, e *entry, res transport.Resolved, err error, gaveUp bool) error {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	close(e.pending)
	e.pending = nil
	switch {
	case err == nil:
		e.addrs, e.until, e.err = res.Addrs, res.Until, nil
	case gaveUp:
	case e.addrs != nil:
		e.until = now.Add(RetryAfter)
		r.log.Warn("bootstrap lookup of an upstream's host failed; its last addresses stay in use",
			zap.String("host", host), zap.Stringers("addrs", e.addrs), zap.Error(err))
	default:
		e.err, e.until = err, now.Add(RetryAfter)
		r.log.Warn("bootstrap lookup of an upstream's host failed; the upstream is skipped, nothing recorded against it",
			zap.String("host", host), zap.Duration("retry_after", RetryAfter), zap.Error(err))
	}
	return err
}

// Close ends the background refreshes and waits for them. Lookups still
// work afterwards, without refreshes.
func (r *Resolver) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return nil
}

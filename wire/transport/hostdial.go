package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// HostResolver finds the addresses of a DoT or DoH upstream's HOST when
// the upstream has no ip (WithResolver): the bootstrap lookup. nxdnsd's
// is wire/transport/bootstrap's, which asks the upstream.bootstrap resolvers or
// the upstreams that have an ip — never the system resolver, which may be
// nxdnsd itself.
type HostResolver interface {
	// Resolve returns host's addresses, in the order to dial them, and
	// until when they may be used without asking again; or an error.
	// ctx bounds the lookup. It is called when a connection is dialled
	// (DoT) or when the addresses it returned last are due again (DoH),
	// never on every query.
	Resolve(ctx context.Context, host string) (Resolved, error)
}

// Resolved is what a HostResolver found for a host.
type Resolved struct {
	Addrs []netip.Addr // at least one
	Until time.Time    // when to ask again
}

// WithResolver makes DoT and DoH find a HOST that is a name, and has no
// WithDialIP address, through r (the bootstrap lookup). Without either,
// such a transport dials nothing: every exchange fails with ErrBootstrap,
// since the system resolver may be nxdnsd itself. nil means not set.
func WithResolver(r HostResolver) Option {
	return func(o *options) { o.resolver = r }
}

// DefaultLookupTimeout bounds a bootstrap lookup when the exchange that
// needs it has no deadline at all.
const DefaultLookupTimeout = 2 * time.Second

// hostDialer opens the TCP connections of a DoT or DoH upstream: to the
// pinned address (the ip key, or a HOST that is an IP literal), else to
// the addresses its HostResolver finds for HOST. It never asks the system
// resolver.
type hostDialer struct {
	host     string         // the address's HOST: a name or an IP literal
	port     uint16         // the address's PORT
	pinned   netip.AddrPort // valid when no lookup is needed
	resolver HostResolver   // or nil: a name without ip cannot be dialled
	dialer   net.Dialer
}

func newHostDialer(o options, addr Address) hostDialer {
	d := hostDialer{host: addr.host, port: addr.port, resolver: o.resolver}
	switch ip, err := netip.ParseAddr(addr.host); {
	case o.dialIP.IsValid():
		d.pinned = netip.AddrPortFrom(o.dialIP, addr.port)
	case err == nil:
		d.pinned = netip.AddrPortFrom(ip, addr.port)
	}
	return d
}

// needsLookup reports whether dialling asks the resolver first.
func (d *hostDialer) needsLookup() bool { return !d.pinned.IsValid() }

// resolve finds the host's addresses, the lookup bounded by lookupDeadline
// so that it ends before the exchange's deadline: a bootstrap that
// stalls is a local error (ErrBootstrap), never an attempt expired at the
// upstream's door. A cancellation of ctx itself is returned as ctx's
// error. The caller names the upstream.
func (d *hostDialer) resolve(ctx context.Context, deadline time.Time) (Resolved, error) {
	if d.resolver == nil {
		return Resolved{}, fmt.Errorf("%w %s: no ip and no bootstrap resolver (nxdnsd never asks the system resolver)", ErrBootstrap, d.host)
	}
	lctx, cancel := context.WithDeadline(ctx, lookupDeadline(time.Now(), deadline))
	defer cancel()
	r, err := d.resolver.Resolve(lctx, d.host)
	switch {
	case ctx.Err() != nil:
		return Resolved{}, ctx.Err()
	case err != nil:
		// %v: the lookup's own timeout or a bootstrap's REFUSED must not
		// pass for the upstream's (actors.Classify).
		return Resolved{}, fmt.Errorf("%w %s: %v", ErrBootstrap, d.host, err)
	case len(r.Addrs) == 0:
		return Resolved{}, fmt.Errorf("%w %s: no address", ErrBootstrap, d.host)
	}
	return r, nil
}

// lookupDeadline is when a lookup started at now for an exchange bounded
// by deadline (zero: none) must end: half-way, leaving the other half to
// the dial, the handshake and the query.
func lookupDeadline(now, deadline time.Time) time.Time {
	if deadline.IsZero() {
		return now.Add(DefaultLookupTimeout)
	}
	return now.Add(deadline.Sub(now) / 2)
}

// dial connects to the pinned address, or to addrs (what resolve found)
// one after another, each given an equal share of the time left before
// ctx's deadline, as net.Dialer does for a name's addresses. It returns
// the first address's error when none connects.
func (d *hostDialer) dial(ctx context.Context, addrs []netip.Addr) (net.Conn, error) {
	if d.pinned.IsValid() {
		return d.dialer.DialContext(ctx, "tcp", d.pinned.String())
	}
	var first error
	for i, ip := range addrs {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok && i < len(addrs)-1 {
			actx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/time.Duration(len(addrs)-i)))
		}
		c, err := d.dialer.DialContext(actx, "tcp", netip.AddrPortFrom(ip, d.port).String())
		cancel()
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if first == nil {
		first = errors.New("no address to dial")
	}
	return nil, first
}

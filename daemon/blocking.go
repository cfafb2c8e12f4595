package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/blocking"
	"github.com/nxdnsd/nxdnsd/wire/transport"
	"github.com/nxdnsd/nxdnsd/wire/transport/bootstrap"
)

// Blocking (spec section 11) is one Manager per daemon: its lists, their
// copies and counters outlive every reload, which hands it the new
// [blocking] table (Manager.Reload). Every generation's handler decides
// through its one Engine.

// newBlocking builds the daemon's Manager and the lookup of its list
// hosts; the lists are loaded by Start.
func (d *Daemon) newBlocking() {
	d.listHosts = bootstrap.New(d.log.Named("blocking"), []bootstrap.Source{{Name: "the upstream pool", Exchanger: poolExchanger{&d.front}}})
	d.blocking = blocking.NewManager(blocking.Options{
		Config:      d.cfg.Blocking,
		DialContext: d.dialList,
		Logger:      d.log,
	})
	d.metrics.RegisterWriter(d.blocking.WritePrometheus)
}

// closeBlocking stops the lists' loop (a fetch in flight is cancelled)
// and the lookups of their hosts.
func (d *Daemon) closeBlocking() {
	d.blocking.Close()
	_ = d.listHosts.Close()
}

// poolExchanger asks the upstream pool of the current generation
// directly, not through the query path: the list hosts' lookups are
// nxdnsd's own queries (no client, so they count in no client's share of
// the slots) and are never blocked, never cached, never logged.
type poolExchanger struct{ f *front }

var _ transport.Exchanger = poolExchanger{}

// Exchange implements transport.Exchanger; the pool's own budget bounds
// it, the expiry is ignored. q is the lookup's own (transport.NewQuery),
// with no client.
func (p poolExchanger) Exchange(ctx context.Context, q *transport.Query, _ time.Time) (transport.Answer, error) {
	g := p.f.acquire() // held: a reload does not close the pool under the lookup
	defer g.Release()
	res := g.pool.Exchange(ctx, q, time.Now(), nil)
	return res.Answer, res.Err
}

// dialList dials a list's host for a fetch (blocking.Options.DialContext):
// an IP literal as it is, a name at the addresses the upstream pool gives
// it (never the system resolver, which may be nxdnsd itself), one after
// the other until one connects.
func (d *Daemon) dialList(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: bad port: %w", addr, err)
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		res, err := d.listHosts.Resolve(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("looking %s up through the upstream pool: %w", host, err)
		}
		addrs = res.Addrs
	}
	var dialer net.Dialer
	var errs []error
	for _, a := range addrs {
		if network == "tcp4" && !a.Is4() || network == "tcp6" && a.Is4() {
			continue
		}
		c, err := dialer.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("dialing %s over %s: no address of that family", host, network)
	}
	d.log.Debug("blocking: dialing a list's host failed", zap.String("host", host), zap.Errors("errors", errs))
	return nil, errors.Join(errs...)
}

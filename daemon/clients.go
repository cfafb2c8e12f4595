package daemon

import (
	"context"
	"net/netip"
	"time"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/clients"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/query"
	"github.com/nxdnsd/nxdnsd/rebind"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// The daemon's part of spec section 15: one client directory for the
// daemon's life (its files watched, its PTR names kept across reloads),
// and each generation's rebinding protection and router upstreams.

// newClients starts the directory of cfg's [clients]. Its PTR lookups go
// through the forward zones of the generation current when each runs.
func (d *Daemon) newClients(cfg *config.Config) *clients.Directory {
	c := clients.FromConfig(cfg.Clients)
	c.PollInterval, c.OnChange = d.opts.clientsPoll, d.opts.onClientsChange
	return clients.New(c, d.lookupPTR, d.log)
}

// lookupPTR is the directory's clients.LookupFunc: the PTR query of a
// private address through the forward zone of the current generation that
// covers its reverse name (never the pool), the generation held for the
// exchange as a query holds it.
func (d *Daemon) lookupPTR(ctx context.Context, addr netip.Addr) (string, error) {
	if d.front.current() == nil {
		return "", clients.ErrNoPTR // no generation yet: nothing to ask
	}
	g := d.front.acquire()
	defer g.Release()
	return clients.ZoneLookup(g.handler.ZoneClient)(ctx, addr)
}

// protection is the rebinding protection of cfg (nil when it is off).
func protection(cfg *config.Config) *rebind.Filter {
	return rebind.New(cfg.Server.RebindProtection, cfg.Server.RebindAllowNames)
}

// routerPool is the pool over its router upstreams alone
// (query.HandlerConfig.Routers).
type routerPool struct {
	pool *actors.Pool
	only uint64 // pool indexes, a bit each
}

func (r routerPool) Exchange(ctx context.Context, q *transport.Query, arrival time.Time, trail []actors.Attempt) actors.Result {
	return r.pool.ExchangeOnly(ctx, q, arrival, trail, r.only)
}

// routers returns p over the enabled upstreams of cfg whose address is a
// router's (rebind.RouterAddress: RFC 1918 or ULA), or nil when there is
// none. p's indexes are cfg's enabled upstreams in order.
func routers(cfg *config.Config, p *actors.Pool) query.Pool {
	var only uint64
	i := 0
	for _, u := range cfg.Upstreams {
		if !u.IsEnabled() {
			continue
		}
		if ip, ok := u.IPAddr(); ok && rebind.RouterAddress(ip) {
			only |= 1 << i
		}
		i++
	}
	if only == 0 {
		return nil
	}
	return routerPool{pool: p, only: only}
}

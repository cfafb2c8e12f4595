package daemon

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/metrics"
	"github.com/nxdnsd/nxdnsd/query"
	"github.com/nxdnsd/nxdnsd/query/forward"
	"github.com/nxdnsd/nxdnsd/wire/server"
	"github.com/nxdnsd/nxdnsd/wire/transport"
	"github.com/nxdnsd/nxdnsd/wire/transport/bootstrap"
)

// generation is the query path one configuration builds: the upstream
// pool, the forward-zone clients and the handler over them. A query runs
// on the generation that was current when it arrived, to its end; a
// reload publishes a new one for the queries after it and retires the old
// one once no query holds it any more (spec section 9).
type generation struct {
	cfg        *config.Config        // what it was built from (the running configuration)
	pool       *actors.Pool          // always non-nil
	ups        *metrics.Upstreams    // the pool's attempt series
	handler    *query.Handler        // always non-nil
	keys       []upstreamKey         // by pool index: what decides whether a reload keeps the upstream
	transports []transport.Transport // by pool index: the upstream's transport, closed with its actor
	zones      []transport.Transport // the forward-zone clients, this generation's own
	boots      []transport.Transport // the upstream.bootstrap clients, this generation's own
	loops      *actors.Loops         // the upstreams' loop checks: the first generation's, handed on by every reload

	refs     atomic.Int64  // queries running on it
	retiring atomic.Bool   // a newer generation is current
	atRetire int64         // queries running on it when it was retired; written by retire only
	drained  chan struct{} // closed once retiring with no query running
	drain    sync.Once
}

// upstreamKey is what an upstream must keep for a reload to keep its
// actor, health, counters and connections (spec section 9).
type upstreamKey struct {
	name, address, ip, caFile string
	slots                     int
}

func keyOf(u config.Upstream) upstreamKey {
	return upstreamKey{name: u.Name, address: u.Address, ip: u.IP, caFile: u.CAFile, slots: u.Slots}
}

// build builds the query path of cfg. The upstreams of prev (nil at
// start-up) whose key cfg has unchanged are handed to the new pool as they
// run; the others get a new transport and actor. ups are the new pool's
// attempt series. On an error nothing built is left open and prev is
// untouched.
func (d *Daemon) build(cfg *config.Config, prev *generation, ups *metrics.Upstreams) (_ *generation, err error) {
	g := &generation{cfg: cfg, ups: ups, drained: make(chan struct{})}
	if prev != nil {
		g.loops = prev.loops // a kept upstream's checks are still recognised
	} else {
		g.loops = actors.NewLoops()
	}
	var (
		specs   []actors.Spec
		kept    []*actors.Upstream
		fresh   []transport.Transport // opened here: closed again on an error
		sources []bootstrap.Source    // the upstreams that need no lookup, in priority order
	)
	running := d.boot.Sources()
	defer func() {
		if err == nil {
			return
		}
		d.boot.Use(running)
		if g.handler != nil {
			g.handler.Close()
		}
		if g.pool != nil {
			if prev != nil {
				g.pool.CloseExcept(prev.pool)
			} else {
				g.pool.Close()
			}
		}
		for _, t := range fresh {
			_ = t.Close()
		}
		for _, z := range g.zones {
			_ = z.Close()
		}
		for _, b := range g.boots {
			_ = b.Close()
		}
	}()
	if prev != nil {
		// At start-up the command logs the warnings, in -check's words.
		for _, w := range cfg.Warnings() {
			d.log.Warn(w.String(), zap.String("path", w.Path))
		}
	}

	for _, u := range cfg.Upstreams {
		if !u.IsEnabled() {
			continue
		}
		k := keyOf(u)
		if i := prev.find(k); i >= 0 {
			specs = append(specs, actors.Spec{Name: u.Name, Address: transport.RedactAddress(u.Address), Slots: u.Slots})
			kept = append(kept, prev.pool.Upstream(i))
			g.keys = append(g.keys, k)
			g.transports = append(g.transports, prev.transports[i])
			if !u.NeedsBootstrap() {
				sources = append(sources, bootstrap.Source{Name: u.Name, Exchanger: prev.transports[i]})
			}
			continue
		}
		// The address, ip and ca_file come parsed and loaded by the
		// configuration's validation: nothing is parsed or read again.
		opts := []transport.Option{
			// One idle connection per slot (tcp, tls, https): every
			// exchange in flight can reuse one. UDP ignores them: each
			// exchange has a socket and a port of its own.
			transport.WithMaxConns(u.Slots), transport.WithMaxIdle(u.Slots),
			transport.WithDialIP(u.DialIP), transport.WithRootCAs(u.RootCAs),
		}
		if u.NeedsBootstrap() {
			// The daemon's one lookup, whatever generation: a reload
			// that keeps the upstream keeps its transport.
			opts = append(opts, transport.WithResolver(d.boot))
		}
		t, err := transport.NewTransport(u.Addr, opts...)
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", u.Name, err)
		}
		fresh = append(fresh, t)
		if !u.NeedsBootstrap() {
			sources = append(sources, bootstrap.Source{Name: u.Name, Exchanger: t})
		}
		var x transport.Exchanger = t
		if d.opts.exchanger != nil {
			x = d.opts.exchanger(len(specs), t)
		}
		// The address as /api/health shows it: a DoH path is often an
		// account's secret.
		specs = append(specs, actors.Spec{Name: u.Name, Address: transport.RedactAddress(u.Address), Slots: u.Slots, Transport: x})
		kept = append(kept, nil)
		g.keys = append(g.keys, k)
		g.transports = append(g.transports, t)
	}
	p := cfg.Upstream
	if len(p.BootstrapAddrs) > 0 {
		// upstream.bootstrap replaces the upstreams as the lookup's
		// sources: plain DNS, UDP and TCP after truncation.
		sources = nil
		for _, ap := range p.BootstrapAddrs {
			f := forward.New(ap.String(), p.ReadTimeout())
			g.boots = append(g.boots, f)
			sources = append(sources, bootstrap.Source{Name: "bootstrap " + ap.String(), Exchanger: f})
		}
	}
	// Before the pool starts, whose start-up probes may look hosts up.
	d.boot.Use(sources)
	policy := actors.Policy{
		AttemptTimeout: p.AttemptTimeout(),
		TotalTimeout:   p.TotalTimeout(),
		Health: actors.HealthPolicy{
			FailureThreshold: p.FailureThreshold,
			Backoff:          p.Backoff(),
			BackoffMax:       p.BackoffMax(),
			ProbeTimeout:     p.ProbeTimeout(),
			OnProbe:          d.probed,
			Loops:            g.loops,
			OnLoop:           d.looped,
			OnLoopLeavesNone: d.noneInService,
		},
	}
	if prev == nil {
		g.pool, err = actors.NewPool(policy, specs, ups)
	} else {
		g.pool, err = actors.NewPoolFrom(policy, specs, kept, ups)
	}
	if err != nil {
		return nil, err
	}

	var zones []query.Zone
	for _, z := range cfg.ForwardZones {
		f := forward.New(z.Resolver, p.ReadTimeout())
		g.zones = append(g.zones, f)
		zones = append(zones, query.Zone{Name: z.Zone, Resolver: z.Resolver, Client: f})
	}
	g.handler, err = query.NewHandler(query.HandlerConfig{
		Zones:    zones,
		Records:  localRecords(cfg.LocalRecords),
		Pool:     g.pool,
		Hooks:    d.hooks,
		Cache:    d.cacheConfig(cfg, g.pool),
		Allow:    cfg.Server.AllowPrefixes,
		Loops:    g.loops,
		Clients:  d.clients,
		Rebind:   protection(cfg),
		Routers:  routers(cfg, g.pool),
		Blocking: d.blocking.Engine(),
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// find returns the pool index of the upstream with key k, or -1; a nil
// generation has none.
func (g *generation) find(k upstreamKey) int {
	if g == nil {
		return -1
	}
	for i, gk := range g.keys {
		if gk == k {
			return i
		}
	}
	return -1
}

// enabledNames returns the names of cfg's enabled upstreams: the pool's,
// by index.
func enabledNames(cfg *config.Config) []string {
	var names []string
	for _, u := range cfg.Upstreams {
		if u.IsEnabled() {
			names = append(names, u.Name)
		}
	}
	return names
}

// zoneNames returns cfg's forward zones as query.Entry.Zone spells them.
func zoneNames(cfg *config.Config) []string {
	zones := make([]string, len(cfg.ForwardZones))
	for i, z := range cfg.ForwardZones {
		zones[i] = dns.CanonicalName(z.Zone)
	}
	return zones
}

// Release ends a query's hold on g (front.acquire). It is the
// query.Hold of a query handed on to a worker, which releases it there.
func (g *generation) Release() {
	if g.refs.Add(-1) == 0 && g.retiring.Load() {
		g.drain.Do(func() { close(g.drained) })
	}
}

// retire marks g replaced: drained is closed once its last query has
// released it. Whichever of retire and the last release comes second sees
// the other's write (both are sequentially consistent), so one of them
// closes drained.
func (g *generation) retire() {
	g.retiring.Store(true)
	if g.atRetire = g.refs.Load(); g.atRetire == 0 {
		g.drain.Do(func() { close(g.drained) })
	}
}

// close ends what g owns and next, the generation after it (nil at
// shutdown), does not hold: the cache's refreshes, the pool's actors, the
// transports of upstreams next does not keep, the forward-zone clients.
// No query may be running on g.
func (g *generation) close(next *generation) {
	g.handler.Close()
	if next == nil {
		g.pool.Close()
	} else {
		g.pool.CloseExcept(next.pool)
	}
	for i, t := range g.transports {
		if next == nil || !next.pool.Holds(g.pool.Upstream(i)) {
			_ = t.Close()
		}
	}
	for _, z := range g.zones {
		_ = z.Close()
	}
	for _, b := range g.boots {
		_ = b.Close()
	}
}

// front is every listener's handler: it runs each query on the current
// generation and holds that generation until the query has returned.
type front struct {
	cur atomic.Pointer[generation] // never nil once the daemon is built
}

var _ server.FastHandler = (*front)(nil)

// ServeDNS implements server.Handler for a query the fast path did not
// begin (TCP): the current generation serves it, held until it returns.
func (f *front) ServeDNS(ctx context.Context, req *server.Request) []byte {
	g := f.acquire()
	defer g.Release()
	return g.handler.ServeDNS(ctx, req)
}

// ServeFast implements server.FastHandler: the current generation answers
// what needs no resolver on the listener's goroutine. The generation is
// chosen here, once: a query it hands on carries it, held, in its
// req.Pending, which releases it once the worker has served the query or
// the listener has abandoned it (query.Handler.ServeFastHolding).
func (f *front) ServeFast(req *server.Request) (answer []byte, handled bool) {
	g := f.acquire()
	defer func() {
		if r := recover(); r != nil {
			g.Release()
			panic(r) // the listener contains it
		}
	}()
	if answer, handled = g.handler.ServeFastHolding(req, g); handled {
		g.Release()
	}
	return answer, handled
}

var _ query.Hold = (*generation)(nil)

// acquire returns the current generation, held. A reload may publish a new
// one between the load and the hold: the hold is then given back and the
// new one taken, so that a generation retired and found drained is never
// used again.
func (f *front) acquire() *generation {
	for {
		g := f.cur.Load()
		g.refs.Add(1)
		if f.cur.Load() == g {
			return g
		}
		g.Release()
	}
}

// current returns the current generation, not held: for what reads its
// state (the health API, the metrics), never for a query.
func (f *front) current() *generation { return f.cur.Load() }

// currentPool is the pool of the current generation, for the admin API.
type currentPool struct{ f *front }

func (p currentPool) Sync()                   { p.f.current().pool.Sync() }
func (p currentPool) Status() []actors.Status { return p.f.current().pool.Status() }
func (p currentPool) NetworkWindow() time.Duration {
	return p.f.current().pool.NetworkWindow()
}

// Package daemon wires nxdnsd together from a validated configuration:
// the upstream transports and pool, the forward-zone clients, the query
// path, the client listeners, and what observes them: the metrics, the
// query log and the admin HTTP server. cmd/nxdnsd only parses flags and
// signals; tests start a whole daemon in-process through this package.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/admin"
	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/metrics"
	"github.com/nxdnsd/nxdnsd/query"
	"github.com/nxdnsd/nxdnsd/querylog"
	"github.com/nxdnsd/nxdnsd/wire"
)

// Daemon is one running nxdnsd.
type Daemon struct {
	cfg     *config.Config
	log     *zap.Logger
	pool    *actors.Pool
	cache   *cache.Cache // or nil: cache.enabled is false
	handler *query.Handler
	server  *wire.Server
	closers []wire.Transport // every upstream and forward-zone client, closed at shutdown

	metrics *metrics.Metrics // always non-nil
	qlog    *querylog.Logger // or nil: query_log.path is ""
	admin   *admin.Server    // or nil: admin.listen is ""
}

// New builds a daemon from cfg, which must have passed validation, and
// opens the query log. Nothing listens until Start.
func New(cfg *config.Config, log *zap.Logger) (*Daemon, error) {
	return newDaemon(cfg, log, options{})
}

func newDaemon(cfg *config.Config, log *zap.Logger, opts options) (_ *Daemon, err error) {
	if log == nil {
		log = zap.NewNop()
	}
	d := &Daemon{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			d.abandon()
		}
	}()

	var specs []actors.Spec
	var names []string
	for _, u := range cfg.Upstreams {
		if !u.IsEnabled() {
			continue
		}
		// The address, ip and ca_file come parsed and loaded by the
		// configuration's validation: nothing is parsed or read again.
		t, err := wire.NewTransport(u.Addr,
			// One idle connection per slot (tcp, tls, https): every
			// exchange in flight can reuse one. UDP shares one socket.
			wire.WithMaxConns(u.Slots), wire.WithMaxIdle(u.Slots),
			wire.WithDialIP(u.DialIP), wire.WithRootCAs(u.RootCAs))
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", u.Name, err)
		}
		d.closers = append(d.closers, t)
		var x wire.Exchanger = t
		if opts.exchanger != nil {
			x = opts.exchanger(len(specs), t)
		}
		specs = append(specs, actors.Spec{Name: u.Name, Address: u.Address, Slots: u.Slots, Transport: x})
		names = append(names, u.Name)
	}
	d.metrics = newMetrics(cfg, names)
	p := cfg.Upstream
	d.pool, err = actors.NewPool(actors.Policy{
		AttemptTimeout: p.AttemptTimeout(),
		TotalTimeout:   p.TotalTimeout(),
		Health: actors.HealthPolicy{
			FailureThreshold: p.FailureThreshold,
			Backoff:          p.Backoff(),
			BackoffMax:       p.BackoffMax(),
		},
	}, specs, d.metrics)
	if err != nil {
		return nil, err
	}
	d.metrics.AttachPool(d.pool)
	if d.qlog, err = newQueryLog(cfg.QueryLog, log, opts); err != nil {
		return nil, err
	}

	var zones []query.Zone
	for _, z := range cfg.ForwardZones {
		f := wire.NewForwarder(z.Resolver, p.ReadTimeout())
		d.closers = append(d.closers, f)
		zones = append(zones, query.Zone{Name: z.Zone, Resolver: z.Resolver, Client: f})
	}
	d.cache = d.newCache()
	d.handler, err = query.NewHandler(query.HandlerConfig{
		Zones:   zones,
		Records: localRecords(cfg.LocalRecords),
		Pool:    d.pool,
		Hooks:   &observer{metrics: d.metrics, qlog: d.qlog},
		Cache:   d.cacheConfig(),
	})
	if err != nil {
		return nil, err
	}

	s := cfg.Server
	d.server = &wire.Server{
		Listen:               s.Listen,
		Handler:              d.handler,
		TCPIdleTimeout:       s.TCPIdleTimeout(),
		MaxTCPConnections:    s.MaxTCPConnections,
		MaxConcurrentQueries: s.MaxConcurrentQueries,
		Logger:               log,
		OnOverload:           d.metrics.OverloadRefused,
		OnPanic:              d.metrics.Panic,
	}
	d.admin = d.newAdmin()
	return d, nil
}

// localRecords hands the records the configuration's validation built to
// the query path, which takes them as they are.
func localRecords(rs []config.LocalRecord) []query.Record {
	out := make([]query.Record, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.RR)
	}
	return out
}

// Start binds every listener, the admin server's included, and starts
// serving. On an error nothing is left running.
func (d *Daemon) Start() error {
	if d.admin != nil {
		if err := d.admin.Start(); err != nil {
			d.abandon()
			return err
		}
	}
	if err := d.server.Start(); err != nil {
		if d.admin != nil {
			_ = d.admin.Shutdown(context.Background())
		}
		d.abandon()
		return err
	}
	udp, tcp := d.server.Addrs()
	d.log.Info("nxdnsd started",
		zap.Strings("udp", addrStrings(udp)),
		zap.Strings("tcp", addrStrings(tcp)),
		zap.Strings("upstreams", upstreamNames(d.pool)),
		zap.String("admin", adminString(d.AdminAddr())),
		zap.String("query_log", d.cfg.QueryLog.Path))
	return nil
}

// adminString is the admin address for the log, "" when it is off.
func adminString(ap netip.AddrPort) string {
	if !ap.IsValid() {
		return ""
	}
	return ap.String()
}

// abandon releases whatever New built, for a New or a Start that failed.
func (d *Daemon) abandon() {
	if d.handler != nil {
		d.handler.Close()
	}
	if d.pool != nil {
		d.pool.Close()
	}
	d.closeTransports()
	d.closeQueryLog()
}

// Addrs returns the bound client addresses, UDP then TCP.
func (d *Daemon) Addrs() (udp, tcp []netip.AddrPort) {
	u, t := d.server.Addrs()
	return addrPorts(u), addrPorts(t)
}

// Pool returns the upstream pool, for the health API and metrics.
func (d *Daemon) Pool() *actors.Pool { return d.pool }

// Shutdown stops listening at once, lets queries in flight finish until
// ctx is done, stops the admin server, stops the pool's actors, closes
// every upstream socket, and finally writes out and closes the query log:
// every line of an answered query is written, none is cut off by the exit.
// A second call does nothing more.
func (d *Daemon) Shutdown(ctx context.Context) error {
	err := d.server.Shutdown(ctx)
	if d.admin != nil {
		if aerr := d.admin.Shutdown(ctx); err == nil {
			err = aerr
		}
	}
	d.handler.Close() // the cache's refreshes end
	d.saveCache()
	d.pool.Close()
	d.closeTransports()
	d.closeQueryLog()
	d.log.Info("nxdnsd stopped")
	return err
}

// Run starts the daemon and serves until ctx is done, then shuts down,
// giving queries in flight the pool's total budget to finish. A value on
// reopen (SIGUSR1, or nil for none) reopens the query log file.
func Run(ctx context.Context, cfg *config.Config, log *zap.Logger, reopen <-chan os.Signal) error {
	d, err := New(cfg, log)
	if err != nil {
		return err
	}
	if err := d.Start(); err != nil {
		return err
	}
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-reopen:
			_ = d.Reopen() // logged there; a failed reopen keeps the old file
		}
	}
	log.Info("shutting down", zap.Duration("grace", d.grace()))
	sctx, cancel := context.WithTimeout(context.Background(), d.grace())
	defer cancel()
	if err := d.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// grace is how long a shutdown waits for queries in flight: a query never
// needs more than its pool budget (or a forward-zone read timeout), plus a
// moment to write the answer.
func (d *Daemon) grace() time.Duration {
	p := d.cfg.Upstream
	return max(p.TotalTimeout(), p.ReadTimeout()) + 500*time.Millisecond
}

func (d *Daemon) closeQueryLog() {
	if d.qlog == nil {
		return
	}
	if err := d.qlog.Close(); err != nil {
		d.log.Error("closing the query log", zap.String("path", d.cfg.QueryLog.Path), zap.Error(err))
	}
}

func (d *Daemon) closeTransports() {
	for _, c := range d.closers {
		if err := c.Close(); err != nil {
			d.log.Debug("closing transport", zap.Error(err))
		}
	}
	d.closers = nil
}

func upstreamNames(p *actors.Pool) []string {
	out := make([]string, p.Len())
	for i := range out {
		out[i] = p.Name(i)
	}
	return out
}

func addrStrings(as []net.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

func addrPorts(as []net.Addr) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(as))
	for _, a := range as {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			out = append(out, ap)
		}
	}
	return out
}

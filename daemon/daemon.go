// Package daemon wires nxdnsd together from a validated configuration:
// the upstream transports and pool, the forward-zone clients, the query
// path, the client listeners, and what observes them: the metrics, the
// query log and the admin HTTP server. cmd/nxdnsd only parses flags and
// signals; tests start a whole daemon in-process through this package.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/admin"
	"github.com/nxdnsd/nxdnsd/blocking"
	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/clients"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/internal/sdnotify"
	"github.com/nxdnsd/nxdnsd/metrics"
	"github.com/nxdnsd/nxdnsd/query"
	"github.com/nxdnsd/nxdnsd/querylog"
	"github.com/nxdnsd/nxdnsd/wire/server"
	"github.com/nxdnsd/nxdnsd/wire/transport/bootstrap"
)

// Daemon is one running nxdnsd.
type Daemon struct {
	log   *zap.Logger
	opts  options
	cache *cache.Cache        // or nil: cache.enabled is false; kept by every reload
	boot  *bootstrap.Resolver // the host-name lookup of upstreams without ip; kept by every reload, its sources each generation's
	hooks *observer           // every generation's query.Hooks

	// clients names the clients (spec section 15); kept by every reload,
	// which gives it the new [clients].
	clients *clients.Directory

	// front is every listener's handler: it holds the current generation
	// (the pool, the forward-zone clients, the query handler), which a
	// reload replaces.
	front front

	// admission bounds the queries and client TCP connections of every
	// listener together (server.max_concurrent_queries,
	// max_tcp_connections): one server.Server per listen address shares it.
	admission *server.Admission

	cert atomic.Pointer[tls.Certificate] // the encrypted listeners' (encrypted.go), or nil

	metrics *metrics.Metrics // always non-nil
	qlog    *querylog.Logger // or nil: query_log.path is ""
	admin   *admin.Server    // or nil: admin.listen is ""

	// history is the query history (spec section 12), opened by Start in
	// the background and by a reload that changes [history]. Always
	// non-nil; what it holds may be no history.
	history *historian

	// blocking owns the lists (spec section 11), once per daemon: every
	// generation's handler decides through its Engine, and a reload
	// hands it the new [blocking] table. Always non-nil.
	blocking  *blocking.Manager
	listHosts *bootstrap.Resolver // the list hosts' lookup, through the pool

	live atomic.Bool // DNS is served: from Start until Shutdown begins

	// level, or nil, is the logger's level: a reload sets it to log.level.
	level *zap.AtomicLevel

	// mu serialises Reload and Shutdown and guards the fields below. cfg
	// is also read without it where no reload can run at the same time:
	// before Start, on Run's goroutine (which is the one that reloads), and
	// once Shutdown has begun.
	mu               sync.Mutex
	cfg              *config.Config // the running configuration
	listeners        []*listener    // by server.listen, in its order
	stopped          bool           // Shutdown has begun
	lastReloadFailed bool
	lastRetired      chan struct{}  // closed when the latest generation retired has been closed; nil before any
	bg               sync.WaitGroup // generations retiring, listeners a reload removed
}

// newDaemon builds a daemon from cfg, which must have passed validation,
// with the test seams opts (Run gives none but the version), and opens the
// query log. Nothing listens until Start.
func newDaemon(cfg *config.Config, log *zap.Logger, opts options) (_ *Daemon, err error) {
	if log == nil {
		log = zap.NewNop()
	}
	d := &Daemon{cfg: cfg, log: log, opts: opts, admission: server.NewAdmission(), boot: bootstrap.New(log, nil)}
	defer func() {
		if err != nil {
			d.abandon()
		}
	}()

	d.metrics = newMetrics(cfg, enabledNames(cfg), opts.version)
	d.newBlocking()
	if d.qlog, err = newQueryLog(cfg.QueryLog, log, opts, d.metrics); err != nil {
		return nil, err
	}
	d.history = newHistorian(log)
	d.metrics.AttachHistory(d.history)
	d.hooks = &observer{metrics: d.metrics, recent: newRecent(cfg.Admin.RecentQueries), qlog: d.qlog, history: d.history, localError: d.localError}
	d.cache = d.newCache()
	d.clients = d.newClients(cfg)
	d.hooks.clients = d.clients
	g, err := d.build(cfg, nil, d.metrics.Upstreams(enabledNames(cfg)))
	if err != nil {
		return nil, err
	}
	d.front.cur.Store(g)
	d.metrics.UsePool(g.pool, g.ups)
	d.cert.Store(cfg.Server.Certificate)
	for _, a := range listenAddrs(cfg) {
		d.listeners = append(d.listeners, d.newListener(a))
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

// Start loads the block lists' last good copies (their downloads go on
// in the background), starts opening the query history (in the
// background too: DNS is served while it opens), binds every listener,
// the admin server's included, and starts serving. On an error nothing is
// left running.
func (d *Daemon) Start() error {
	d.blocking.Start(context.Background())
	d.history.apply(d.cfg.History)
	if d.admin != nil {
		if err := d.admin.Start(); err != nil {
			d.abandon()
			return err
		}
	}
	d.mu.Lock()
	err := d.startListeners(d.listeners)
	d.mu.Unlock()
	if err != nil {
		if d.admin != nil {
			_ = d.admin.Shutdown(context.Background())
		}
		d.abandon()
		return err
	}
	d.live.Store(true)
	// The start-up probes' loop checks may have gone out before anything
	// listened: an upstream that forwards back here is checked again now.
	d.front.current().pool.CheckLoops()
	udp, tcp := d.Addrs()
	d.log.Info("nxdnsd started",
		zap.Strings("udp", apStrings(udp)),
		zap.Strings("tcp", apStrings(tcp)),
		zap.Strings("upstreams", upstreamNames(d.Pool())),
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
	d.closeBlocking() // first: a fetch of its may be asking the pool
	if d.clients != nil {
		d.clients.Close()
	}
	if g := d.front.current(); g != nil {
		g.close(nil)
	}
	_ = d.boot.Close()
	if d.history != nil {
		d.history.close()
	}
	d.closeQueryLog()
}

// Addrs returns the bound client addresses, UDP then TCP, each in the
// order of server.listen.
func (d *Daemon) Addrs() (udp, tcp []netip.AddrPort) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.listeners {
		u, t := l.srv.Addrs()
		udp, tcp = append(udp, addrPorts(u)...), append(tcp, addrPorts(t)...)
	}
	return udp, tcp
}

// Pool returns the current upstream pool, for the health API and metrics.
// A reload replaces it.
func (d *Daemon) Pool() *actors.Pool { return d.front.current().pool }

// Shutdown stops listening at once, lets queries in flight finish until
// ctx is done, stops the admin server, stops the pool's actors, closes
// every upstream socket, and finally writes out and closes the query
// history and the query log: every row and line of an answered query is
// written, none is cut off by the exit.
// A second call does nothing more.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return nil
	}
	d.stopped = true
	ls := d.listeners
	d.mu.Unlock()
	d.live.Store(false)

	err := d.stopListeners(ctx, ls)
	d.clients.Close() // its PTR lookups hold generations: they end first
	if d.admin != nil {
		if aerr := d.admin.Shutdown(ctx); err == nil {
			err = aerr
		}
	}
	// No query runs any more: the generations a reload retired drain and
	// close, and the listeners it removed have stopped. The lists' loop
	// stops before the pool its fetches look hosts up through.
	d.bg.Wait()
	d.closeBlocking()
	g := d.front.current()
	g.handler.Close() // the cache's refreshes end
	d.saveCache()
	g.close(nil)
	_ = d.boot.Close()
	d.history.close() // after the listeners: it writes what is queued
	d.closeQueryLog()
	d.log.Info("nxdnsd stopped")
	return err
}

// RunOptions are what Run serves besides its configuration: the signals
// and the service manager. The zero value serves none of them.
type RunOptions struct {
	// Reopen (SIGUSR1) reopens the query log file; nil: never.
	Reopen <-chan os.Signal

	// Reload (SIGHUP) applies the configuration Load reads (Reload).
	Reload <-chan os.Signal

	// Load reads the configuration file again; nil when nxdnsd runs on
	// the embedded default, whose reload changes nothing (and says so).
	Load func() (*config.Config, error)

	// Level, or nil, is the logger's level, which a reload sets to
	// log.level.
	Level *zap.AtomicLevel

	// Notifier, or nil, tells systemd when every listener is bound
	// (READY=1), when a reload begins and ends, and when nxdnsd stops.
	Notifier *sdnotify.Notifier

	// Version is nxdnsd's version, for nxdns_build_info and the status
	// page; "" reads "unknown".
	Version string
}

// Run starts the daemon and serves until ctx is done, then shuts down,
// giving queries in flight the pool's total budget to finish.
func Run(ctx context.Context, cfg *config.Config, log *zap.Logger, ro RunOptions) error {
	if log == nil {
		log = zap.NewNop()
	}
	d, err := newDaemon(cfg, log, options{version: ro.Version})
	if err != nil {
		return err
	}
	d.level = ro.Level
	if err := d.Start(); err != nil {
		return err
	}
	notify := func(states ...string) {
		if err := ro.Notifier.Notify(states...); err != nil {
			log.Warn("telling systemd the service's state", zap.Strings("state", states), zap.Error(err))
		}
	}
	notify(sdnotify.Ready, sdnotify.Status(d.status()))
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-ro.Reopen:
			_ = d.Reopen() // logged there; a failed reopen keeps the old file
		case <-ro.Reload:
			if ro.Load == nil {
				log.Info("SIGHUP: running on the embedded default (no -c), there is no file to read again; nothing changed")
				continue
			}
			notify(sdnotify.Reloading(sdnotify.Monotonic()))
			loaded, ok := readConfig(ctx, ro.Load)
			if !ok {
				log.Warn("SIGHUP: stopping while the configuration file was still being read; the reload is abandoned")
				done = true
				continue
			}
			_ = d.Reload(loaded) // logged there; a failed reload keeps the running configuration
			notify(sdnotify.Ready, sdnotify.Status(d.status()))
		}
	}
	notify(sdnotify.Stopping)
	log.Info("shutting down", zap.Duration("grace", d.grace()))
	sctx, cancel := context.WithTimeout(context.Background(), d.grace())
	defer cancel()
	if err := d.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// status is the one line systemctl status shows: where DNS is served, and
// whether the last reload failed.
func (d *Daemon) status() string {
	udp, tcp := d.Addrs()
	s := "serving DNS: udp " + strings.Join(apStrings(udp), " ") + "; tcp " + strings.Join(apStrings(tcp), " ")
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lastReloadFailed {
		s += "; the last reload failed, the running configuration stays"
	}
	return s
}

// grace is how long a shutdown waits for queries in flight (graceOf).
func (d *Daemon) grace() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.graceOf(d.cfg)
}

func (d *Daemon) closeQueryLog() {
	if d.qlog == nil {
		return
	}
	if err := d.qlog.Close(); err != nil {
		d.log.Error("closing the query log", zap.String("path", d.cfg.QueryLog.Path), zap.Error(err))
	}
}

func upstreamNames(p *actors.Pool) []string {
	out := make([]string, p.Len())
	for i := range out {
		out[i] = p.Name(i)
	}
	return out
}

func apStrings(as []netip.AddrPort) []string {
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

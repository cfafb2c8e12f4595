package daemon

import (
	"io"
	"net/http"
	"net/netip"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/admin"
	"github.com/nxdnsd/nxdnsd/clients"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/metrics"
	"github.com/nxdnsd/nxdnsd/query"
	"github.com/nxdnsd/nxdnsd/querylog"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// options are New's seams for tests; the zero value is production.
type options struct {
	// onProbe, when set, hears every health probe once its outcome has
	// been applied: a test waits on it (the upstream is in backoff now,
	// or healthy again) instead of on the clock.
	onProbe probeHook

	// queryLog, when set, receives the query log instead of
	// query_log.path (which must still be non-empty to turn it on): a
	// test stalls it to play a hung disk.
	queryLog io.Writer

	// queryLogBuffer overrides querylog.DefaultBuffer.
	queryLogBuffer int

	// exchanger, when set, wraps upstream i's transport: a test makes one
	// that holds its slot past any budget.
	exchanger func(i int, t transport.Exchanger) transport.Exchanger

	// version is nxdnsd's version (RunOptions.Version).
	version string

	// clientsPoll overrides clients.DefaultPollInterval, and
	// onClientsChange, when set, hears every change of the client names
	// (clients.Config.OnChange): a test rewrites a leases file and waits
	// for it instead of for the clock.
	clientsPoll     time.Duration
	onClientsChange func()
}

// observer is the daemon's query.Hooks: every answered query is counted
// in the metrics, kept among the recent queries, written to the query
// log and queued for the query history. It runs on the query's goroutine and neither waits nor allocates.
type observer struct {
	metrics *metrics.Metrics // always non-nil
	recent  *recent          // or nil: admin.recent_queries is 0
	qlog    *querylog.Logger // or nil: the query log is off
	history *historian       // or nil (benchmarks); it may hold no history

	// localError, or nil, hears each attempt that ended in a local error
	// (no route, no sockets), which the pool records nowhere: the
	// upstream's actor remembers it for the network's state
	// (actors.Pool.LocalError). Only a failing query pays for it.
	localError func(upstream string, err error)

	// clients, or nil, names the queries the listener refuses itself
	// (overloaded); the query path names the others.
	clients *clients.Directory
}

var _ query.Hooks = (*observer)(nil)

// overloaded counts a query refused past server.max_concurrent_queries (or
// its client's share) and writes its query-log line and history row
// (source refused), on the listener's goroutine: the line is encoded into
// a free buffer of the writer or dropped, the row queued or dropped,
// never waited for.
func (o *observer) overloaded(raw []byte, proto string, client netip.AddrPort) {
	o.metrics.OverloadRefused()
	if o.qlog == nil && !o.history.active() {
		return
	}
	var e query.Entry
	query.RefusedEntry(&e, raw, proto, client, time.Now())
	if o.clients != nil {
		e.ClientName = o.clients.Name(client.Addr())
	}
	if o.qlog != nil && !o.qlog.Log(&e) {
		o.metrics.QueryLogDropped()
	}
	o.history.record(&e)
}

// QueryDone implements query.Hooks.
func (o *observer) QueryDone(e *query.Entry) {
	o.metrics.Query(e.Proto, e.Rcode, e.Duration)
	if e.Source == query.SourceForwardZone {
		o.metrics.ForwardZone(e.Zone, e.ZoneOutcome)
	}
	if e.CacheResult != "" {
		o.metrics.CacheLookup(e.CacheResult)
	}
	if e.Source == query.SourceRefused {
		o.metrics.ACLRefused()
	}
	if e.Rebind {
		o.metrics.RebindStripped()
	}
	if e.LoopCheck {
		return // counted, never shown: docs/operations.md, "Forwarding loops"
	}
	o.recent.add(e)
	if o.qlog != nil && !o.qlog.Log(e) {
		o.metrics.QueryLogDropped()
	}
	o.history.record(e)
	if o.localError != nil {
		for i := range e.Attempts {
			if a := &e.Attempts[i]; a.Outcome == actors.OutcomeLocalError {
				o.localError(a.Upstream, a.Err)
			}
		}
	}
}

// localError tells the current pool that an attempt at upstream just
// ended in the local error err (observer.localError).
func (d *Daemon) localError(upstream string, err error) {
	d.front.current().pool.LocalError(upstream, time.Now(), err)
}

// newMetrics creates the metric set with a series for every enabled
// upstream (names, by pool index) and every forward zone.
func newMetrics(cfg *config.Config, names []string, version string) *metrics.Metrics {
	zones := make([]string, len(cfg.ForwardZones))
	for i, z := range cfg.ForwardZones {
		zones[i] = dns.CanonicalName(z.Zone) // as query.Entry.Zone spells it
	}
	return metrics.New(metrics.Config{Upstreams: names, Zones: zones, Version: version})
}

// newQueryLog starts the query log the configuration asks for, or returns
// nil when query_log.path is "". Lines lost to failed writes count in m.
func newQueryLog(cfg config.QueryLog, log *zap.Logger, opts options, m *metrics.Metrics) (*querylog.Logger, error) {
	if cfg.Path == "" {
		return nil, nil
	}
	o := querylog.Options{
		Encoder: querylog.Encoder{Attempts: cfg.Attempts},
		Buffer:  opts.queryLogBuffer,
		Logger:  log,
		Dropped: m.QueryLogLost,
	}
	if opts.queryLog != nil {
		return querylog.New(opts.queryLog, o), nil
	}
	return querylog.Open(cfg.Path, o)
}

// newAdmin returns the admin server of admin.listen, or nil when it is "".
func (d *Daemon) newAdmin() *admin.Server {
	if d.cfg.Admin.Listen == "" {
		return nil
	}
	return admin.New(admin.Config{
		Listen:  d.cfg.Admin.Listen,
		Metrics: d.metrics,
		Pool:    currentPool{&d.front},
		Logger:  d.log,
		Live:    d.live.Load,

		Queries:  d.hooks.recent,
		Counters: d.metrics,
		Version:  d.opts.version,
		Allow:    func(a netip.Addr) bool { return d.front.current().handler.Allows(a) },
		Hosts:    d.cfg.Admin.Hosts,
		Auth:     adminAuth(d.cfg.Admin),
		Routes: func(mux *http.ServeMux) {
			d.blocking.Register(mux)
			d.history.Register(mux)
		},
	})
}

// adminAuth is who may use the admin API: [admin]'s password_hash and
// tokens. Like the rest of [admin], a reload leaves them as they started.
func adminAuth(a config.Admin) admin.AuthConfig {
	ac := admin.AuthConfig{PasswordHash: a.PasswordHash}
	for _, t := range a.Tokens {
		ac.Tokens = append(ac.Tokens, t.AuthToken())
	}
	return ac
}

// AdminAddr returns the admin server's bound address (its port when
// admin.listen asked for port 0), or the zero AddrPort when the admin
// server is off or not started.
func (d *Daemon) AdminAddr() netip.AddrPort {
	if d.admin == nil {
		return netip.AddrPort{}
	}
	return d.admin.Addr()
}

// Reopen reopens the query-log file, for logrotate: it renames the file,
// then sends SIGUSR1, and nxdnsd starts a new file at the configured path.
// Lines accepted before the call go to the old file. It does nothing when
// the query log is off or on stdout. A failure is logged and returned; the
// old file is kept.
func (d *Daemon) Reopen() error {
	if d.qlog == nil {
		return nil
	}
	if err := d.qlog.Reopen(); err != nil {
		d.log.Error("reopening the query log; still writing to the old file", zap.String("path", d.cfg.QueryLog.Path), zap.Error(err))
		return err
	}
	d.log.Info("query log reopened", zap.String("path", d.cfg.QueryLog.Path))
	return nil
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/nxdnsd/nxdnsd/clients"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/wire/server"
)

// ErrStopped is Reload's error once Shutdown has begun.
var ErrStopped = errors.New("daemon: shut down")

// Reload applies the configuration load returns (SIGHUP: the -c file read
// again), as spec section 9 says. A valid configuration takes effect at
// once for new queries; queries in flight finish on the one they started
// with. Upstreams whose name, address, ip, ca_file and slots are unchanged
// keep their health, counters and connections; the answer cache is kept;
// new listen addresses are bound before old ones are closed. Settings
// that need a restart (the [server] limits, the cache's memory and TTL
// rules, [query_log], [admin]) keep their running values, and the reload
// says which were left.
//
// An invalid configuration, or one whose new listen address cannot be
// bound, changes nothing: every problem is logged with its TOML path and
// returned. Either way the reload is counted in
// nxdns_config_reloads_total.
func (d *Daemon) Reload(load func() (*config.Config, error)) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return ErrStopped
	}
	err := d.reloadLocked(load)
	d.metrics.ConfigReload(err == nil)
	if err != nil {
		d.lastReloadFailed = true
		d.log.Error("reload failed; the running configuration stays", zap.Error(err))
		return err
	}
	d.lastReloadFailed = false
	return nil
}

// readConfig runs load (the -c file read again) on a goroutine of its own
// and waits for it or for ctx, so that SIGTERM stops the daemon even while
// a read hangs (a file on a network mount that stopped answering; a FIFO
// or a device is refused at once, see safefile). It returns load's result
// as a function for Reload, and false when ctx ended first: the read then
// ends on its own and its result is dropped.
func readConfig(ctx context.Context, load func() (*config.Config, error)) (func() (*config.Config, error), bool) {
	type result struct {
		cfg *config.Config
		err error
	}
	done := make(chan result, 1) // the read never waits to deliver
	go func() {
		cfg, err := load()
		done <- result{cfg, err}
	}()
	select {
	case r := <-done:
		return func() (*config.Config, error) { return r.cfg, r.err }, true
	case <-ctx.Done():
		return nil, false
	}
}

func (d *Daemon) reloadLocked(load func() (*config.Config, error)) error {
	next, err := load()
	if err != nil {
		var ps config.Problems
		if errors.As(err, &ps) {
			for _, p := range ps {
				d.log.Error("reload: configuration problem", zap.String("path", p.Path), zap.String("problem", p.Message))
			}
			if len(ps) == 1 {
				return errors.New("the configuration has a problem")
			}
			return fmt.Errorf("the configuration has %d problems", len(ps))
		}
		return err
	}
	running := d.cfg
	eff, pinned := d.effective(running, next)

	// New addresses first: should one fail to bind, nothing has changed.
	// They serve the running generation until the new one is published.
	keep, added, removed := d.splitListeners(listenAddrs(eff))
	for i, l := range added {
		if err := l.srv.Start(); err != nil {
			d.stopListeners(context.Background(), added[:i])
			return err
		}
	}

	old := d.front.current()
	ups := d.metrics.Upstreams(enabledNames(eff))
	g, err := d.build(eff, old, ups)
	if err != nil {
		d.stopListeners(context.Background(), added)
		return err
	}

	// Published: every query from here on runs on g.
	d.front.cur.Store(g)
	d.cert.Store(eff.Server.Certificate)
	d.metrics.UsePool(g.pool, ups)
	d.metrics.UseZones(zoneNames(eff))
	// Lists whose name, source and kind are unchanged keep their copies.
	d.blocking.Reload(eff.Blocking)
	// A changed [history] closes the open one and opens the new in the
	// background; an unchanged one that could not be opened is retried.
	d.history.apply(eff.History)
	d.cfg = eff
	d.clients.Reload(clients.FromConfig(eff.Clients))
	if d.level != nil && eff.Log.Level != running.Log.Level {
		if lvl, err := zapcore.ParseLevel(eff.Log.Level); err == nil {
			d.level.SetLevel(lvl)
		}
	}
	d.listeners = keep
	if len(removed) > 0 {
		d.bg.Go(func() {
			// Their queries may run on either configuration.
			ctx, cancel := context.WithTimeout(context.Background(), max(d.graceOf(running), d.graceOf(eff)))
			defer cancel()
			if err := d.stopListeners(ctx, removed); err != nil {
				d.log.Warn("closing the listen addresses a reload removed: answers still being written were given up", zap.Error(err))
			}
		})
	}
	d.retire(old, g)

	kept, addedUps, removedUps := upstreamChanges(old, g)
	d.log.Info("configuration reloaded",
		zap.Strings("upstreams", upstreamNames(g.pool)),
		zap.Strings("upstreams_kept", kept),
		zap.Strings("upstreams_added", addedUps),
		zap.Strings("upstreams_removed", removedUps),
		zap.Int("forward_zones", len(eff.ForwardZones)),
		zap.Int("local_records", len(eff.LocalRecords)),
		zap.Strings("listen", eff.Server.Listen))
	if len(pinned) > 0 {
		d.log.Warn("reload: these settings take effect at the next restart; their running values stay",
			zap.Strings("keys", pinned))
	}
	return nil
}

// retire hands old to a goroutine that waits for its last query, and for
// the generation retired before it (which may share upstreams with it),
// then closes what next does not hold.
func (d *Daemon) retire(old, next *generation) {
	before := d.lastRetired
	done := make(chan struct{})
	d.lastRetired = done
	old.retire()
	d.log.Debug("the previous configuration retires once its queries are answered", zap.Int64("queries_in_flight", old.atRetire))
	d.bg.Go(func() {
		defer close(done)
		<-old.drained
		if before != nil {
			<-before
		}
		d.metrics.RetirePool(old.pool)
		old.close(next)
	})
}

// liveKeys are the keys of each table that a reload applies; the others
// of these tables need a restart. Tables not listed (upstream, upstreams,
// forward_zones, local_records) are applied whole.
//
// A field read from no key (toml:"-", what validation parsed from the key
// beside it) is never pinned by itself: the key it comes from must be live
// (server.allow and its prefixes are).
var liveKeys = map[string][]string{
	// allow, rebinding protection, the encrypted listeners and their pair
	// are the query handler's and the listeners', rebuilt by every reload
	// (certbot's renewal hook reloads: encrypted.go).
	"server": {"listen", "allow", "rebind_protection", "rebind_allow", "tls_listen", "https_listen", "cert_file", "key_file"},
	// serve_stale also decides how long the cache keeps expired answers:
	// a restart's.
	"cache":     {"prefetch", "stale_answer_ttl_s", "stale_client_timeout_ms"},
	"query_log": nil,
	"admin":     nil,
	"log":       {"level"},
}

// effective returns the configuration a reload to next runs: next, with
// the keys that need a restart at their running values, and those keys.
func (d *Daemon) effective(running, next *config.Config) (*config.Config, []string) {
	eff := *next
	var pinned []string
	r, e := reflect.ValueOf(running).Elem(), reflect.ValueOf(&eff).Elem()
	for i := range e.NumField() {
		table := tomlKey(e.Type().Field(i))
		live, ok := liveKeys[table]
		if !ok {
			continue
		}
		if table == "log" && d.level == nil {
			live = nil
		}
		pinned = append(pinned, pin(table, r.Field(i), e.Field(i), live)...)
	}
	return &eff, pinned
}

// pin sets every key of the table next that is not live back to its value
// in run, and returns the TOML paths of those that differed.
func pin(table string, run, next reflect.Value, live []string) []string {
	var out []string
	for i := range next.NumField() {
		key := tomlKey(next.Type().Field(i))
		if key == "" || slices.Contains(live, key) {
			continue
		}
		if !reflect.DeepEqual(run.Field(i).Interface(), next.Field(i).Interface()) {
			out = append(out, table+"."+key)
			next.Field(i).Set(run.Field(i))
		}
	}
	return out
}

// tomlKey is a struct field's TOML key; "" for a field read from no key.
func tomlKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if k == "-" {
		return ""
	}
	return k
}

// listener is one listen address and the server bound to it. Each address
// has a server of its own, so that a reload binds a new address and closes
// an old one without touching the others.
type listener struct {
	addr string
	srv  *server.Server
}

// newListener returns the (unstarted) server of one listen address of
// listenAddrs (plain, or an encrypted listener's), with the running
// [server] limits.
func (d *Daemon) newListener(addr string) *listener {
	s := d.cfg.Server
	srv := &server.Server{
		Handler:              &d.front,
		TCPIdleTimeout:       s.TCPIdleTimeout(),
		MaxTCPConnections:    s.MaxTCPConnections,
		MaxConcurrentQueries: s.MaxConcurrentQueries,
		Logger:               d.log,
		OnOverload:           d.hooks.overloaded,
		OnPanic:              d.metrics.Panic,
		Admission:            d.admission,
	}
	if !d.listenEncrypted(srv, addr) {
		srv.Listen = []string{addr}
		// A socket and a reader per core (SO_REUSEPORT): cache hits are
		// answered on the readers, in parallel. Measured side by side
		// (nxdnsbench, dnsperf -l 5, two pairs): hits 0.74/0.74 -> 0.85/1.04
		// of the same-run ceiling at the same CPU per hit; forwarding
		// 0.38/0.37 -> 0.41/0.42.
		srv.UDPSockets = runtime.GOMAXPROCS(0)
	}
	return &listener{addr: addr, srv: srv}
}

// splitListeners returns the listeners of listen in its order (the
// running ones kept, new ones unstarted), the new ones, and the running
// ones listen no longer names.
func (d *Daemon) splitListeners(listen []string) (next, added, removed []*listener) {
	running := make(map[string]*listener, len(d.listeners))
	for _, l := range d.listeners {
		running[l.addr] = l
	}
	for _, a := range listen {
		if l, ok := running[a]; ok {
			next = append(next, l)
			delete(running, a)
			continue
		}
		l := d.newListener(a)
		next = append(next, l)
		added = append(added, l)
	}
	for _, l := range d.listeners {
		if _, gone := running[l.addr]; gone {
			removed = append(removed, l)
		}
	}
	return next, added, removed
}

// startListeners binds and starts ls, all or none.
func (d *Daemon) startListeners(ls []*listener) error {
	for i, l := range ls {
		if err := l.srv.Start(); err != nil {
			d.stopListeners(context.Background(), ls[:i])
			return err
		}
	}
	return nil
}

// stopListeners shuts ls down at once, together, letting their queries in
// flight finish until ctx is done; it returns the first error.
func (d *Daemon) stopListeners(ctx context.Context, ls []*listener) error {
	errs := make(chan error, len(ls))
	for _, l := range ls {
		go func() { errs <- l.srv.Shutdown(ctx) }()
	}
	var first error
	for range ls {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// upstreamChanges names the upstreams next kept from old, and those it
// added and removed.
func upstreamChanges(old, next *generation) (kept, added, removed []string) {
	for i := range next.pool.Len() {
		if old.pool.Holds(next.pool.Upstream(i)) {
			kept = append(kept, next.pool.Name(i))
		} else {
			added = append(added, next.pool.Name(i))
		}
	}
	for i := range old.pool.Len() {
		if !next.pool.Holds(old.pool.Upstream(i)) {
			removed = append(removed, old.pool.Name(i))
		}
	}
	return kept, added, removed
}

// graceOf is how long a shutdown of cfg's listeners waits for queries in
// flight: a query never needs more than its pool budget (or a forward-zone
// read timeout), plus a moment to write the answer.
func (d *Daemon) graceOf(cfg *config.Config) time.Duration {
	p := cfg.Upstream
	return max(p.TotalTimeout(), p.ReadTimeout()) + 500*time.Millisecond
}

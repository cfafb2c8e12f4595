package blocking

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/config"
)

// Options configures a Manager.
type Options struct {
	// Config is the [blocking] table, validated (config.Load or Validate).
	Config config.Blocking

	// DialContext dials a list's host. The daemon passes one that
	// resolves the host name through nxdnsd's own upstream pool, never
	// blocked, never the system resolver (spec section 11). nil dials IP
	// literals only: a URL naming a host then fails to fetch, and says so.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// Logger logs each fetch that fails, with its reason; nil logs nothing.
	Logger *zap.Logger

	// Now is the clock (nil: time.Now): the lists' ages, pauses.
	Now func() time.Time
}

// Limits of a fetch (spec section 11).
const (
	// FetchTimeout bounds one download, from the dial to the body's end.
	FetchTimeout = 60 * time.Second
	// MaxRedirects is the most redirects a download follows.
	MaxRedirects = 5
)

// List states, as /api/lists says them.
const (
	StateLoading  = "loading"  // no copy yet: the list blocks nothing
	StateOK       = "ok"       // the last fetch (or the copy loaded at start) is in force
	StateStale    = "stale"    // the last fetch failed: the copy in force is older
	StateDisabled = "disabled" // enabled = false, or blocking.enabled = false
)

// Manager owns the lists: it loads the last good copies at Start, fetches
// every list in the background and every refresh_h, applies a reload, and
// publishes each change to its Engine as a new snapshot. Fetches run one
// at a time on its loop goroutine, so at most one new copy is being built
// beside the old ones.
type Manager struct {
	engine *Engine // always non-nil
	log    *zap.Logger
	now    func() time.Time
	client *http.Client

	reqs chan request // to the loop

	// atPeak, when set (by a benchmark, before Start), is called on the
	// loop while a fetch builds its new set, at the moment the most
	// memory is live: the old set in force, the new table and the
	// builder's scratch.
	atPeak func()

	mu      sync.Mutex // guards following
	cfg     config.Blocking
	lists   []*list // configured order, disabled ones included
	custom  customRules
	metrics map[string]*listMetrics // by list name, "rule" included; kept across reloads
	started bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the loop has returned; nil before Start
}

// list is one configured list and its copy in force. The fields below cfg
// are guarded by Manager.mu; a list replaced on reload is dropped whole,
// and a fetch that finishes for a dropped list changes nothing.
type list struct {
	cfg config.BlockingList
	m   *listMetrics

	set          *set // the copy in force, or nil
	state        string
	updatedAt    time.Time // when the copy in force was fetched (or confirmed by a 304)
	checkedAt    time.Time // the last fetch attempt
	lastError    string
	etag         string
	lastModified string
	refused      [32]byte // the SHA-256 of the last body refused for holding too few rules
	hasRefused   bool
	failures     int // fetches failed in a row, for the retry's delay
}

// listMetrics are a list's counters, which outlive its copies.
type listMetrics struct {
	blocked   atomic.Uint64
	updated   atomic.Uint64
	unchanged atomic.Uint64
	failed    atomic.Uint64
}

// request is a message to the loop: fetch these lists now.
type request struct {
	initial []*list       // lists made anew by a reload: load their last good copy first
	all     bool          // fetch every list
	names   []string      // else fetch these
	reply   chan struct{} // closed when done; nil: nobody waits
}

// NewManager returns a Manager for opts; nothing is loaded until Start.
func NewManager(opts Options) *Manager {
	m := &Manager{
		engine:  NewEngine(opts.Now),
		log:     opts.Logger,
		now:     opts.Now,
		reqs:    make(chan request, 16),
		metrics: map[string]*listMetrics{},
	}
	if m.log == nil {
		m.log = zap.NewNop()
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.client = newHTTPClient(opts.DialContext)
	m.mu.Lock()
	m.applyLocked(opts.Config)
	m.mu.Unlock()
	return m
}

// Engine is what the query path calls.
func (m *Manager) Engine() *Engine { return m.engine }

// Start loads every enabled list's last good copy from state_dir (and
// reads file sources), publishes them, and then fetches every list in the
// background, again every refresh_h. The copies are in force when Start
// returns; no download is waited for. The loop stops when ctx is done or
// Close is called.
func (m *Manager) Start(ctx context.Context) {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return
	}
	m.started = true
	ctx, m.cancel = context.WithCancel(ctx)
	m.done = make(chan struct{})
	lists := m.lists
	cfg := m.cfg
	m.mu.Unlock()

	for _, l := range lists {
		if cfg.Enabled && l.cfg.IsEnabled() {
			m.loadInitial(cfg, l)
		}
	}
	go m.run(ctx)
}

// Close stops the loop and waits for it: a fetch in flight is cancelled.
func (m *Manager) Close() {
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	m.client.CloseIdleConnections()
}

// Reload applies a new [blocking] table (SIGHUP): lists whose source or
// kind changed, and new ones, are loaded afresh (their last good copy
// first) and fetched; file sources are read again; the others keep their
// copies. Groups, custom rules and the answer settings take effect at
// once; the loading and fetching are handed to the loop, which does them
// after what is queued before, one list at a time (so a reload never
// builds a copy beside one the loop is building). Reload waits only for
// the loop to take the work.
func (m *Manager) Reload(cfg config.Blocking) {
	m.mu.Lock()
	fresh := m.applyLocked(cfg)
	done := m.done
	var names []string
	for _, l := range m.lists {
		// File sources are read again on SIGHUP; the fresh ones are
		// loaded (which reads a file) and URL ones then fetched.
		if l.state != StateDisabled && (l.cfg.IsURL() == contains(fresh, l)) {
			names = append(names, l.cfg.Name)
		}
	}
	m.mu.Unlock()
	if done == nil || !cfg.Enabled {
		return // Start loads whatever is configured then
	}
	select {
	case m.reqs <- request{initial: fresh, names: names}:
	case <-done:
	}
}

// applyLocked takes cfg: it keeps the lists whose name, source and kind
// are unchanged, makes the others anew, and publishes a snapshot. It
// returns the enabled lists made anew, which have no copy yet.
func (m *Manager) applyLocked(cfg config.Blocking) []*list {
	old := make(map[string]*list, len(m.lists))
	for _, l := range m.lists {
		old[l.cfg.Name] = l
	}
	var lists, fresh []*list
	for _, lc := range cfg.Lists {
		if l, ok := old[lc.Name]; ok && l.cfg.Source == lc.Source && l.cfg.Kind == lc.Kind && l.cfg.IsEnabled() == lc.IsEnabled() && cfg.Enabled == m.cfg.Enabled {
			l.cfg = lc
			lists = append(lists, l)
			continue
		}
		l := &list{cfg: lc, m: m.metricsFor(lc.Name), state: StateLoading}
		if !lc.IsEnabled() || !cfg.Enabled {
			l.state = StateDisabled
		} else {
			fresh = append(fresh, l)
		}
		lists = append(lists, l)
	}
	m.cfg, m.lists = cfg, lists
	m.metricsFor(config.ReservedListName)
	m.custom.config(cfg.Block, cfg.Allow, cfg.StateDir)
	if err := m.custom.loadErr; err != nil {
		m.log.Warn("blocking: the rules added through the API could not be read; they are not in force", zap.String("state_dir", cfg.StateDir), zap.Error(err))
	}
	m.publishLocked()
	return fresh
}

func (m *Manager) metricsFor(name string) *listMetrics {
	lm, ok := m.metrics[name]
	if !ok {
		lm = &listMetrics{}
		m.metrics[name] = lm
	}
	return lm
}

// publishLocked builds the snapshot of the lists' copies in force and
// swaps it in. Nothing is copied but the small tables: the sets are
// shared with the previous snapshot.
func (m *Manager) publishLocked() {
	if !m.cfg.Enabled {
		m.engine.store(nil)
		return
	}
	s := &snapshot{cname: m.cfg.CNAMEInspection, answer: Answer{Mode: m.cfg.Answer, TTL: uint32(m.cfg.AnswerTTLS)}}
	for _, a := range m.cfg.AnswerAddrs {
		if a.Is4() {
			s.answer.IPv4 = a
		} else {
			s.answer.IPv6 = a
		}
	}
	index := map[string]int{}
	for _, l := range m.lists {
		if !l.cfg.IsEnabled() {
			continue
		}
		index[l.cfg.Name] = len(s.lists)
		s.lists = append(s.lists, &listRules{name: l.cfg.Name, allow: l.cfg.Kind == "allow", set: l.set, blocked: &l.m.blocked})
	}
	s.custom = &listRules{name: config.ReservedListName, blocked: &m.metricsFor(config.ReservedListName).blocked}
	if m.custom.set.rules > 0 {
		s.custom.set = m.custom.set // else nil: a query does not look into an empty set
	}
	var defaultLists listBits // a default group that is not configured holds no list
	for _, gc := range m.cfg.Groups {
		g := group{name: gc.Name, prefixes: gc.Prefixes, names: gc.Names}
		for _, name := range gc.Lists {
			if i, ok := index[name]; ok {
				g.lists.add(i)
			}
		}
		if gc.Name == config.DefaultGroup {
			defaultLists = g.lists
			continue
		}
		s.groups = append(s.groups, g)
	}
	if len(m.cfg.Groups) == 0 {
		for i := range s.lists {
			defaultLists.add(i)
		}
	}
	s.groups = append(s.groups, group{name: config.DefaultGroup, lists: defaultLists})
	s.prepare()
	m.engine.store(s)
}

// Refresh fetches the named lists now (all when name is ""), one after
// the other on the loop, and returns when they are done. It fails only
// when ctx ends first, the Manager is not started, or no list has that
// name; a failed fetch is in the list's state.
func (m *Manager) Refresh(ctx context.Context, name string) error {
	r := request{all: name == "", names: []string{name}, reply: make(chan struct{})}
	if name != "" && !m.hasList(name) {
		return fmt.Errorf("%w: %q", ErrNoList, name)
	}
	m.mu.Lock()
	done := m.done
	m.mu.Unlock()
	if done == nil {
		return ErrNotStarted
	}
	select {
	case m.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return ErrNotStarted
	}
	select {
	case <-r.reply:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return ErrNotStarted
	}
}

// Errors of Refresh.
var (
	ErrNoList     = errors.New("blocking: no such list")
	ErrNotStarted = errors.New("blocking: the manager is not running")
)

func (m *Manager) hasList(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.lists {
		if l.cfg.Name == name {
			return true
		}
	}
	return false
}

// enqueue hands r to the loop without waiting; it reports false when the
// queue is full (refreshes are already waiting).
func (m *Manager) enqueue(r request) bool {
	select {
	case m.reqs <- r:
		return true
	default:
		return false
	}
}

// run is the loop: it fetches every list once, then each when it is due
// and whatever is asked, one fetch at a time. It owns no state of its
// own: what it learns goes into the lists under mu.
func (m *Manager) run(ctx context.Context) {
	defer close(m.done)
	m.fetchDue(ctx, true)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Reset(m.untilDue())
		select {
		case <-ctx.Done():
			return
		case r := <-m.reqs:
			m.mu.Lock()
			cfg := m.cfg
			m.mu.Unlock()
			for _, l := range r.initial {
				if ctx.Err() == nil {
					m.loadInitial(cfg, l)
				}
			}
			m.fetchNamed(ctx, r.all, r.names)
			if r.reply != nil {
				close(r.reply)
			}
		case <-timer.C:
			m.fetchDue(ctx, false)
		}
	}
}

// untilDue is the time until the next list is due for a refresh.
func (m *Manager) untilDue() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	refresh := time.Duration(m.cfg.RefreshH) * time.Hour
	next := refresh
	now := m.now()
	for _, l := range m.lists {
		if l.state == StateDisabled {
			continue
		}
		if d := l.nextCheck(refresh).Sub(now); d < next {
			next = d
		}
	}
	return max(next, time.Second)
}

// fetchDue fetches the lists due for a refresh, or at start every URL
// list (files were read by Start).
func (m *Manager) fetchDue(ctx context.Context, start bool) {
	m.mu.Lock()
	refresh := time.Duration(m.cfg.RefreshH) * time.Hour
	now := m.now()
	var due []*list
	for _, l := range m.lists {
		if l.state == StateDisabled || start && !l.cfg.IsURL() {
			continue
		}
		if start || !now.Before(l.nextCheck(refresh)) {
			due = append(due, l)
		}
	}
	m.mu.Unlock()
	for _, l := range due {
		if ctx.Err() != nil {
			return
		}
		m.fetch(ctx, l)
	}
}

// fetchNamed fetches the named lists, or every enabled one.
func (m *Manager) fetchNamed(ctx context.Context, all bool, names []string) {
	m.mu.Lock()
	var todo []*list
	for _, l := range m.lists {
		if l.state != StateDisabled && (all || containsName(names, l.cfg.Name)) {
			todo = append(todo, l)
		}
	}
	m.mu.Unlock()
	for _, l := range todo {
		if ctx.Err() != nil {
			return
		}
		m.fetch(ctx, l)
	}
}

// Retries of a failed fetch: after RetryMin, doubling up to refresh_h.
// A list host that is down at boot (the network not up yet) must not
// leave a list without a copy empty for a day.
const RetryMin = time.Minute

// nextCheck is when l is due: refresh after its last check, sooner after
// a failure. The caller holds Manager.mu.
func (l *list) nextCheck(refresh time.Duration) time.Time {
	return l.checkedAt.Add(retryDelay(l.failures, refresh))
}

// retryDelay is the wait after failures fetches failed in a row.
func retryDelay(failures int, refresh time.Duration) time.Duration {
	if failures == 0 {
		return refresh
	}
	d := RetryMin << min(failures-1, 20)
	return min(d, refresh)
}

func contains(ls []*list, l *list) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

func containsName(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

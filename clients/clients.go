// Package clients names nxdnsd's clients (spec section 15): from
// clients.static, hosts files, DHCP lease files and, for other private
// addresses, PTR lookups through the forward zone covering the reverse
// name. The query path asks Name (or Names) with the client's address:
// one atomic load and a map lookup, no lock, no allocation, never a
// wait. Files are watched (a stat on an interval) and re-read when they
// change and on Reload; PTR lookups run in the background.
package clients

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Defaults of the Config fields that are not configuration keys.
const (
	// DefaultPollInterval is how often the files are stat'ed for a
	// change: a new lease is named within it, and a stat of a few files
	// every two seconds costs nothing.
	DefaultPollInterval = 2 * time.Second

	// DefaultPTRTTL is how long a PTR name, or its absence, is kept:
	// an hour (spec section 15).
	DefaultPTRTTL = time.Hour

	// DefaultMaxLookups bounds the PTR lookups in flight at once: a
	// network's worth of new clients at once (a Wi-Fi access point
	// coming back) is named over a few seconds, not all at once.
	DefaultMaxLookups = 8

	// DefaultLookupTimeout bounds one PTR lookup.
	DefaultLookupTimeout = 5 * time.Second

	// MaxFileBytes bounds a hosts or leases file: a hosts file with a
	// few hundred thousand lines fits, and reading one never strains a
	// small board.
	MaxFileBytes = 32 << 20

	// MaxPTRNames bounds the addresses whose PTR answer is kept; past
	// it, an arbitrary one is forgotten for each new one.
	MaxPTRNames = 1 << 16
)

// Static is one [[clients.static]] entry: a name and its addresses.
type Static struct {
	Name  string
	Addrs []netip.Addr
}

// Config is what a Directory names clients from.
type Config struct {
	Static        []Static // [[clients.static]], first in precedence
	HostsFiles    []string // clients.hosts_files: /etc/hosts format
	LeasesFiles   []string // clients.leases_files: dnsmasq or ISC dhcpd lease files
	ReverseLookup bool     // clients.reverse_lookup: PTR lookups for other private addresses

	// The fields below are fixed by New; Reload ignores them.

	PollInterval  time.Duration    // how often files are stat'ed; 0: DefaultPollInterval
	PTRTTL        time.Duration    // how long a PTR answer is kept; 0: DefaultPTRTTL
	MaxLookups    int              // PTR lookups in flight at once; 0: DefaultMaxLookups
	LookupTimeout time.Duration    // bounds one PTR lookup; 0: DefaultLookupTimeout
	Now           func() time.Time // the clock of lease ends and PTR expiry; nil: time.Now

	// OnChange, when not nil, is called after each change of the names
	// (a file read, a PTR answer, a lease ended, a Reload), on the
	// Directory's own goroutine or Reload's, never on a query's: a
	// blocking group written with names can ask Addresses again. It must
	// not block for long, nor call Reload or Close.
	OnChange func()
}

// Directory is the client names of one daemon. All methods are safe for
// concurrent use.
type Directory struct {
	tab      atomic.Pointer[table]    // always non-nil
	ptr      atomic.Pointer[ptrTable] // always non-nil
	reverse  atomic.Bool              // clients.reverse_lookup, and a LookupFunc given
	pending  [pendingSlots]atomicSlot
	requests chan netip.Addr // addresses to look up, to resolve; never closed
	lookup   LookupFunc      // or nil: no PTR lookups
	log      *zap.Logger     // always non-nil
	opts     Config          // New's, for the fields Reload ignores
	badLines atomic.Uint64
	lookups  atomic.Uint64

	ptrMu sync.Mutex // serialises the writers of ptr: the resolver, Reload

	mu     sync.Mutex // guards following, and the building of tab
	cfg    Config
	hosts  []*file
	leases []*file

	cancel context.CancelFunc
	wg     sync.WaitGroup // watch, resolve and the lookups
}

// New returns the Directory of cfg, its files read, and starts its
// goroutines: the file watcher, and with lookupPTR (nil: no PTR lookups)
// the resolver of PTR names. log (nil: none) hears of missing files (once
// each) and bad lines. Close stops them.
func New(cfg Config, lookupPTR LookupFunc, log *zap.Logger) *Directory {
	if log == nil {
		log = zap.NewNop()
	}
	opts := cfg
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.PTRTTL <= 0 {
		opts.PTRTTL = DefaultPTRTTL
	}
	if opts.MaxLookups <= 0 {
		opts.MaxLookups = DefaultMaxLookups
	}
	if opts.LookupTimeout <= 0 {
		opts.LookupTimeout = DefaultLookupTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	d := &Directory{
		requests: make(chan netip.Addr, 2*pendingSlots),
		lookup:   lookupPTR,
		log:      log,
		opts:     opts,
	}
	d.tab.Store(emptyTable)
	d.ptr.Store(&ptrTable{})
	d.Reload(cfg)

	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.wg.Add(1)
	go d.watch(ctx)
	if lookupPTR != nil {
		d.wg.Add(1)
		go d.resolve(ctx)
	}
	return d
}

// Close stops the Directory's goroutines, cancelling the PTR lookups in
// flight, and waits for them. Name and the others still answer, from
// what was known; no lookup starts again.
func (d *Directory) Close() {
	d.cancel()
	d.wg.Wait()
}

// Reload takes a new configuration (SIGHUP): it re-reads every file
// whether or not it changed, forgets the remembered absences of PTR
// names (the forward zones may have changed), and forgets every PTR name
// when reverse_lookup is now off. Fields that New fixes are ignored.
func (d *Directory) Reload(cfg Config) {
	d.mu.Lock()
	d.cfg = Config{Static: cfg.Static, HostsFiles: cfg.HostsFiles, LeasesFiles: cfg.LeasesFiles, ReverseLookup: cfg.ReverseLookup}
	d.hosts = d.reuse(d.hosts, cfg.HostsFiles, parseHosts)
	d.leases = d.reuse(d.leases, cfg.LeasesFiles, parseLeases)
	for _, f := range append(append([]*file(nil), d.hosts...), d.leases...) {
		d.read(f)
	}
	d.rebuildLocked()
	d.mu.Unlock()

	on := cfg.ReverseLookup && d.lookup != nil
	d.reverse.Store(on)
	d.forgetPTR(on)
	d.changed()
}

// Name returns addr's name, by the precedence of spec section 15 below
// the DoH path name (which is the caller's): clients.static, a hosts
// file, a leases file (unexpired), its PTR name; "" when it has none
// yet. It never waits: for a private address with no name it starts a
// PTR lookup in the background, at most one per address, and a later
// query gets the name. IPv4-mapped addresses are taken as IPv4 and a
// zone is ignored. It allocates nothing.
func (d *Directory) Name(addr netip.Addr) string {
	addr = canonicalAddr(addr)
	if n, ok := d.tab.Load().name.get(addr); ok {
		return n
	}
	return d.ptrName(addr)
}

// Names appends every name addr has to dst and returns it: Name's first,
// then the others of every source in precedence order, and of a PTR name
// of several labels its first label too ("tablet" of "tablet.lan"), so
// that a blocking group matches a client "by its address and every name
// it has" (spec section 14). Like Name it may start a PTR lookup and never
// waits; with a dst of enough capacity it allocates nothing.
func (d *Directory) Names(addr netip.Addr, dst []string) []string {
	addr = canonicalAddr(addr)
	ns, _ := d.tab.Load().names.get(addr)
	dst = append(dst, ns...)
	if len(ns) > 0 && !d.reverse.Load() {
		return dst
	}
	p := d.ptrName(addr)
	if p == "" {
		return dst
	}
	for _, n := range ns {
		if strings.EqualFold(n, p) {
			return dst
		}
	}
	dst = append(dst, p)
	if i := strings.IndexByte(p, '.'); i > 0 {
		dst = append(dst, p[:i])
	}
	return dst
}

// Addresses returns the addresses that have name, ASCII case aside:
// those of clients.static, the hosts files and the unexpired leases, and
// those whose PTR name is name or starts with it as its first label. A
// blocking group written with a name follows it (ask again on OnChange).
// The slice is new; the caller may keep it.
func (d *Directory) Addresses(name string) []netip.Addr {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	out := append([]netip.Addr(nil), d.tab.Load().addrs[name]...)
	if !d.reverse.Load() {
		return out
	}
	d.ptr.Load().m.all(func(a netip.Addr, e ptrEntry) bool {
		if e.name != "" && !contains(out, a) && ptrNameIs(e.name, name) {
			out = append(out, a)
		}
		return true
	})
	return out
}

// ptrNameIs reports whether name, lower case, is ptr or ptr's first label.
func ptrNameIs(ptr, name string) bool {
	if strings.EqualFold(ptr, name) {
		return true
	}
	i := strings.IndexByte(ptr, '.')
	return i > 0 && strings.EqualFold(ptr[:i], name)
}

func contains(as []netip.Addr, a netip.Addr) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

// Stats are counters of a Directory since New.
type Stats struct {
	BadLines   uint64 // lines of hosts and leases files skipped as malformed, at every read
	PTRLookups uint64 // PTR lookups started
	Named      int    // addresses named by clients.static and the files now
	PTRNames   int    // addresses with a PTR name now
}

// Stats returns the Directory's counters.
func (d *Directory) Stats() Stats {
	s := Stats{BadLines: d.badLines.Load(), PTRLookups: d.lookups.Load(), Named: d.tab.Load().names.len()}
	d.ptr.Load().m.all(func(_ netip.Addr, e ptrEntry) bool {
		if e.name != "" {
			s.PTRNames++
		}
		return true
	})
	return s
}

// changed tells OnChange.
func (d *Directory) changed() {
	if d.opts.OnChange != nil {
		d.opts.OnChange()
	}
}

package clients

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/rebind"
)

const (
	// pendingSlots is the size of the table of addresses whose lookup
	// was asked for and has not ended: it keeps the queries of a client
	// being looked up from asking again, with one atomic load each. Two
	// addresses sharing a slot only cost a request the resolver drops.
	pendingSlots = 256

	// errorRetry is how long a failed lookup (not an absent name) waits
	// before the address is asked again.
	errorRetry = time.Minute

	// sweepInterval is how often PTR answers are checked for expiry.
	sweepInterval = time.Minute
)

// ptrTable is the PTR answers, immutable once published.
type ptrTable struct {
	m addrMap[ptrEntry]
}

// ptrEntry is one address's PTR answer.
type ptrEntry struct {
	name    string    // without the trailing dot; "" when it has none
	expires time.Time // when it is asked again
	stale   bool      // expired: Name still gives name, and asks again
}

// wantsPTR reports whether addr is looked up: a private address (RFC
// 1918, CGNAT, ULA, link-local), not loopback.
func wantsPTR(addr netip.Addr) bool {
	return !addr.IsLoopback() && rebind.Private(addr) && !addr.IsUnspecified() && !(addr.Is4() && addr.As4()[0] == 0)
}

// ptrName is Name's PTR part: the address's PTR name, asking for it when
// it is unknown or stale.
//
// An address that is not looked up has no answer in the table (only a
// lookup stores one), so it costs no lookup in it: a client on loopback,
// the host itself, is told apart with one comparison.
func (d *Directory) ptrName(addr netip.Addr) string {
	if !wantsPTR(addr) || !d.reverse.Load() {
		return ""
	}
	e, ok := d.ptr.Load().m.get(addr)
	if ok && !e.stale {
		return e.name
	}
	d.request(addr)
	return e.name
}

// slot is addr's place in d.pending and the value marking it there,
// never 0.
func (d *Directory) slot(addr netip.Addr) (*atomicSlot, uint64) {
	var h uint64
	if addr.Is4() {
		h = uint64(v4key(addr)) * 0x9E3779B97F4A7C15 // Fibonacci hashing
	} else {
		b := addr.As16()
		h = 14695981039346656037 // FNV-1a
		for _, c := range b {
			h = (h ^ uint64(c)) * 1099511628211
		}
	}
	h |= 1
	return &d.pending[(h>>32)%pendingSlots], h
}

// request asks the resolver for addr's PTR name without waiting: a
// request already pending for it is not repeated, and one the resolver
// has no room for is dropped (a later query asks again).
func (d *Directory) request(addr netip.Addr) {
	s, h := d.slot(addr)
	if s.Load() == h {
		return
	}
	s.Store(h)
	select {
	case d.requests <- addr:
	default:
		s.CompareAndSwap(h, 0)
	}
}

// done marks addr's request ended, so that a later query may ask again.
func (d *Directory) done(addr netip.Addr) {
	s, h := d.slot(addr)
	s.CompareAndSwap(h, 0)
}

// ptrResult is one lookup's end.
type ptrResult struct {
	addr netip.Addr
	name string
	err  error
}

// resolve runs the PTR lookups: at most one per address and MaxLookups
// in all at once, each on a goroutine of its own bounded by
// LookupTimeout; it alone publishes d.ptr's answers. It runs until ctx is
// done; the lookups in flight then end with ctx.
func (d *Directory) resolve(ctx context.Context) {
	defer d.wg.Done()
	inflight := make(map[netip.Addr]bool, d.opts.MaxLookups)
	results := make(chan ptrResult, d.opts.MaxLookups) // one place per lookup in flight: a lookup never blocks on it
	sweep := time.NewTicker(sweepInterval)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-d.requests:
			switch {
			case inflight[a]:
			case len(inflight) >= d.opts.MaxLookups || !d.reverse.Load():
				d.done(a)
			default:
				inflight[a] = true
				d.lookups.Add(1)
				d.wg.Add(1)
				go d.lookupOne(ctx, a, results)
			}
		case r := <-results:
			delete(inflight, r.addr)
			if d.reverse.Load() {
				d.store(r, d.opts.Now())
			}
			d.done(r.addr)
			d.changed()
		case <-sweep.C:
			if d.sweep(d.opts.Now()) {
				d.changed()
			}
		}
	}
}

// lookupOne asks for addr's PTR name and sends the result.
func (d *Directory) lookupOne(ctx context.Context, addr netip.Addr, results chan<- ptrResult) {
	defer d.wg.Done()
	lctx, cancel := context.WithTimeout(ctx, d.opts.LookupTimeout)
	defer cancel()
	name, err := d.lookup(lctx, addr)
	results <- ptrResult{addr: addr, name: strings.TrimSuffix(name, "."), err: err}
}

// store publishes r, a copy of the table with it: a name for PTRTTL; an
// absent name (ErrNoPTR, or no error and no name) for PTRTTL too; a
// failure keeps the name known before, asked again after errorRetry.
func (d *Directory) store(r ptrResult, now time.Time) {
	d.ptrMu.Lock()
	defer d.ptrMu.Unlock()
	old := d.ptr.Load().m
	e := ptrEntry{name: r.name, expires: now.Add(d.opts.PTRTTL)}
	switch {
	case r.err == nil && r.name != "" && !validName(r.name):
		d.log.Debug("clients: PTR name refused", zap.Stringer("addr", r.addr), zap.String("name", r.name))
		e.name = ""
	case r.err != nil && !errors.Is(r.err, ErrNoPTR):
		d.log.Debug("clients: PTR lookup failed", zap.Stringer("addr", r.addr), zap.Error(r.err))
		prev, _ := old.get(r.addr)
		e = ptrEntry{name: prev.name, expires: now.Add(errorRetry)}
	case r.err != nil:
		e.name = ""
	}
	m := old.clone(1)
	if _, known := m.get(r.addr); !known && m.len() >= MaxPTRNames {
		m.all(func(a netip.Addr, _ ptrEntry) bool { // an arbitrary one, as map order goes
			m.delete(a)
			return false
		})
	}
	m.set(r.addr, e)
	d.ptr.Store(&ptrTable{m: m})
}

// sweep marks the answers expired by now stale, so that Name asks again,
// and forgets those expired a PTRTTL ago (a client gone) and expired
// absences; it reports whether it changed anything.
func (d *Directory) sweep(now time.Time) bool {
	d.ptrMu.Lock()
	defer d.ptrMu.Unlock()
	old := d.ptr.Load().m
	var (
		m       addrMap[ptrEntry]
		changed bool
	)
	old.all(func(a netip.Addr, e ptrEntry) bool {
		if now.Before(e.expires) || e.stale && now.Before(e.expires.Add(d.opts.PTRTTL)) {
			return true
		}
		if !changed {
			m, changed = old.clone(0), true
		}
		if e.name == "" || e.stale {
			m.delete(a)
		} else {
			e.stale = true
			m.set(a, e)
		}
		return true
	})
	if !changed {
		return false
	}
	d.ptr.Store(&ptrTable{m: m})
	return true
}

// forgetPTR forgets the remembered absences of PTR names, and with on
// false every answer.
func (d *Directory) forgetPTR(on bool) {
	d.ptrMu.Lock()
	defer d.ptrMu.Unlock()
	old := d.ptr.Load().m
	m := newAddrMap[ptrEntry](0)
	if on {
		old.all(func(a netip.Addr, e ptrEntry) bool {
			if e.name != "" {
				m.set(a, e)
			}
			return true
		})
	}
	d.ptr.Store(&ptrTable{m: m})
}

// atomicSlot is one place of Directory.pending: 0, or the mark of the
// address whose lookup is pending.
type atomicSlot = atomic.Uint64

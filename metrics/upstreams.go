package metrics

import (
	"time"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/nxdnsd/nxdnsd/actors"
)

// Upstreams are the per-upstream series one pool's attempts are counted
// in, by that pool's upstream index: the pool's actors.Observer. A reload
// builds a new pool with its own Upstreams (Metrics.Upstreams), and the
// scrape follows it (Metrics.UsePool).
type Upstreams struct {
	names    []string                            // by pool index
	attempts [][len(actors.Outcomes)]*vm.Counter // by pool index, then outcome
	duration []*vm.PrometheusHistogram           // by pool index
}

var _ actors.Observer = (*Upstreams)(nil)

// Upstreams returns the series of a pool whose upstreams are names, in
// pool order, creating those that do not exist yet. A series belongs to
// its upstream's name: a pool that keeps an upstream of the pool before it
// keeps counting on the same counters.
func (m *Metrics) Upstreams(names []string) *Upstreams {
	u := &Upstreams{
		names:    append([]string(nil), names...),
		attempts: make([][len(actors.Outcomes)]*vm.Counter, len(names)),
		duration: make([]*vm.PrometheusHistogram, len(names)),
	}
	for i, name := range names {
		for _, o := range actors.Outcomes {
			u.attempts[i][o] = m.set.GetOrCreateCounter(attemptSeries(name, o))
		}
		u.duration[i] = m.set.GetOrCreatePrometheusHistogramExt(durationSeries(name), durationBuckets)
	}
	return u
}

// ObserveAttempt counts one pool attempt by how it ended and records its
// duration (actors.Observer).
func (u *Upstreams) ObserveAttempt(upstream int, o actors.Outcome, d time.Duration) {
	if upstream < 0 || upstream >= len(u.attempts) || int(o) >= len(actors.Outcomes) {
		return // not a configured upstream or outcome: nothing to attribute it to
	}
	u.attempts[upstream][o].Inc()
	u.duration[upstream].Update(d.Seconds())
}

// UsePool makes the scrape read p, whose upstreams ups names (ups from
// m.Upstreams), in place of the pool attached before; the attempt series
// of upstreams that ups no longer names are dropped (a query still running
// on the old pool may go on counting into them, unseen).
//
// The pool's own counters (budget exhausted, queued waits) carry on: the
// scrape adds what the replaced pools counted. Call RetirePool with the
// replaced pool once its queries have returned, so that what they counted
// after the swap is added too.
func (m *Metrics) UsePool(p Pool, ups *Upstreams) {
	m.poolMu.Lock()
	old := m.pool.Swap(&poolRef{Pool: p, ups: ups})
	if old != nil {
		at := totalsOf(old.Pool)
		m.base = m.base.plus(at)
		if m.retiring == nil {
			m.retiring = make(map[Pool]poolTotals)
		}
		m.retiring[old.Pool] = at
	}
	m.poolMu.Unlock()
	if old == nil {
		return
	}
	kept := make(map[string]bool, len(ups.names))
	for _, n := range ups.names {
		kept[n] = true
	}
	for _, n := range old.ups.names {
		if kept[n] {
			continue
		}
		for _, o := range actors.Outcomes {
			m.set.UnregisterMetric(attemptSeries(n, o))
		}
		m.set.UnregisterMetric(durationSeries(n))
	}
}

// RetirePool adds to the pool counters what p, replaced by UsePool,
// counted after it was replaced. Call it once p's queries have returned.
func (m *Metrics) RetirePool(p Pool) {
	m.poolMu.Lock()
	defer m.poolMu.Unlock()
	at, ok := m.retiring[p]
	if !ok {
		return
	}
	delete(m.retiring, p)
	m.base = m.base.plus(totalsOf(p).minus(at))
}

// poolTotals are the counters a pool keeps itself, beside its upstreams'.
type poolTotals struct {
	exhausted, refused, queued uint64
	queuedSeconds              float64
}

func totalsOf(p Pool) poolTotals {
	return poolTotals{p.BudgetExhaustedTotal(), p.ShareRefusedTotal(), p.QueuedTotal(), p.QueuedSeconds()}
}

func (a poolTotals) plus(b poolTotals) poolTotals {
	return poolTotals{a.exhausted + b.exhausted, a.refused + b.refused, a.queued + b.queued, a.queuedSeconds + b.queuedSeconds}
}

func (a poolTotals) minus(b poolTotals) poolTotals {
	return poolTotals{a.exhausted - b.exhausted, a.refused - b.refused, a.queued - b.queued, a.queuedSeconds - b.queuedSeconds}
}

func attemptSeries(upstream string, o actors.Outcome) string {
	return `nxdns_upstream_attempts_total{upstream="` + escape(upstream) + `",outcome="` + o.String() + `"}`
}

func durationSeries(upstream string) string {
	return `nxdns_upstream_attempt_duration_seconds{upstream="` + escape(upstream) + `"}`
}

// zoneSet is the forward-zone counters by zone name; read-only once
// published.
type zoneSet struct {
	counters map[string]*[len(zoneOutcomes)]*vm.Counter
}

// UseZones makes the forward-zone series of zones (as query.Entry.Zone
// spells them) exist, at zero for a new zone, and counts ForwardZone
// through them. The series of a zone no longer configured stay, at the
// count they reached.
func (m *Metrics) UseZones(zones []string) {
	zs := &zoneSet{counters: make(map[string]*[len(zoneOutcomes)]*vm.Counter, len(zones))}
	for _, z := range zones {
		if _, dup := zs.counters[z]; dup {
			continue
		}
		var cs [len(zoneOutcomes)]*vm.Counter
		for i, o := range zoneOutcomes {
			cs[i] = m.set.GetOrCreateCounter(zoneSeries(z, o))
		}
		zs.counters[z] = &cs
	}
	m.zones.Store(zs)
}

// reloadResults are the result label values of nxdns_config_reloads_total.
var reloadResults = [...]string{"success", "failure"}

// ConfigReload counts one SIGHUP reload: ok when the new configuration
// took effect, false when it was refused and the running one stayed.
func (m *Metrics) ConfigReload(ok bool) {
	if ok {
		m.reloads[0].Inc()
	} else {
		m.reloads[1].Inc()
	}
}

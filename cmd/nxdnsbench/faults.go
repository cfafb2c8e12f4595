package main

import (
	"context"
	"time"

	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/fake"
	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/load"
)

// scenario is one fault burst: nxdnsd at shipped defaults (attempt 2500 ms,
// total 5000 ms) with two upstreams, the primary misbehaving and the
// secondary answering at once.
type scenario struct {
	Name         string
	Slug         string    // names the scenario's files in the work directory
	Primary      fake.Mode // the primary's behaviour during the burst
	PrimarySlots int       // the primary's slots in nxdnsd's configuration
	Flip         bool      // the primary answers a warm-up first, then turns to Primary

	// StartAfter is how long after nxdnsd was started the burst begins
	// (zero: as soon as it answers). The blackhole burst waits 3 s, so
	// that nxdnsd's start-up probes have found the primary dead, as a
	// daemon that has run for a moment would have: a probe of a silent
	// upstream takes two intervals of probe_timeout_ms (1 s), its loop
	// check's and its own, so 2 s left the burst racing the verdict (a
	// 2.5 s p99 whenever the burst began first).
	StartAfter time.Duration

	// MaxP99 is the burst's p99 target, checked in the report's
	// acceptance; zero: none.
	MaxP99 time.Duration
}

// scenarios are the four, in its order: the peers' answered
// percentages are quoted in this order.
var scenarios = []scenario{
	{Name: "blackhole", Slug: "blackhole", Primary: fake.Mode{Kind: fake.Blackhole}, PrimarySlots: 32,
		StartAfter: 3 * time.Second, MaxP99: maxBlackholeP99},
	{Name: "flip", Slug: "flip", Primary: fake.Mode{Kind: fake.Blackhole}, PrimarySlots: 32, Flip: true},
	{Name: "slow (3 s)", Slug: "slow", Primary: fake.Mode{Kind: fake.Delay, Delay: 3 * time.Second}, PrimarySlots: 32},
	{Name: "saturated (20 slots, 100 ms)", Slug: "saturated", Primary: fake.Mode{Kind: fake.Delay, Delay: 100 * time.Millisecond}, PrimarySlots: 20,
		MaxP99: maxSaturatedP99},
}

// maxBlackholeP99 bounds the blackhole burst's p99 (issue 14): once the
// start-up probe has found the primary dead, no client waits for it, and
// every answer is the secondary's, a loopback round trip.
const maxBlackholeP99 = 100 * time.Millisecond

// warmUpQueries is the flip scenario's warm-up: enough for nxdnsd to open
// its sockets to a healthy primary and record successes, at the burst's
// concurrency.
const warmUpQueries = 500

// burstSendLimit stops a burst sending after this many client timeouts:
// 2,000 queries at 200 in flight take 10 rounds even if every query timed
// out, so 4 rounds would only pass if nxdnsd stalled; the rest are then
// reported unsent, and the whole run keeps its time bound.
const burstSendLimit = 4

// burst is one scenario's outcome.
type burst struct {
	scenario
	res       *load.Result
	warmUp    *load.Result // the flip's warm-up, or nil
	peakRSS   int64
	primary   fake.Stats // what the primary saw, warm-up included
	secondary fake.Stats
	queries   int
}

// runBurst starts fresh fakes and a fresh nxdnsd, plays s and stops them.
func runBurst(ctx context.Context, c runConfig, dir string, s scenario) (*burst, error) {
	initial := s.Primary
	if s.Flip {
		initial = fake.Mode{}
	}
	primary, secondary, err := startFakes(c, initial, nil)
	if err != nil {
		return nil, err
	}
	defer primary.Close()
	defer secondary.Close()
	conf, err := c.nxdnsdConf(primary, secondary, s.PrimarySlots, "")
	if err != nil {
		return nil, err
	}
	started := time.Now()
	nx, err := startChild(ctx, c.nxdnsd, dir, "burst-"+s.Slug, conf)
	if err != nil {
		return nil, err
	}
	defer nx.stop()
	if err := sleepUntil(ctx, started.Add(s.StartAfter)); err != nil {
		return nil, err
	}

	b := &burst{scenario: s, queries: c.burstQueries}
	lc := load.Config{
		Server:   nx.addr,
		InFlight: c.burstInFlight,
		Timeout:  c.burstTimeout,
		Duration: burstSendLimit * c.burstTimeout,
	}
	if s.Flip {
		lc.Queries, lc.Prefix = warmUpQueries, "w"
		if b.warmUp, err = load.Run(ctx, lc); err != nil {
			return nil, err
		}
		primary.SetMode(s.Primary)
	}
	lc.Queries, lc.Prefix = c.burstQueries, "b"
	if b.res, err = load.Run(ctx, lc); err != nil {
		return nil, err
	}
	b.peakRSS, _ = nx.peakRSS()
	b.primary, b.secondary = primary.Stats(), secondary.Stats()
	return b, nil
}

// sleepUntil returns at t, or with ctx's error when it ends first.
func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answeredPct is the share of the burst's queries answered NOERROR.
func (b *burst) answeredPct() float64 {
	if b.queries == 0 {
		return 0
	}
	return 100 * float64(b.res.Rcodes[0]) / float64(b.queries)
}

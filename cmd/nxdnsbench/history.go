package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/fake"
)

// The history rows (-history, issue 28): nxdnsd's forwarding and hits
// rows again with the query history on, in a file of the work directory,
// beside the same rows with it off (every other row runs with
// `[history] enabled = false`). After each run the child's
// nxdns_history_rows_total and nxdns_history_dropped_total say how many
// rows were written and lost.

// maxHistoryLoss is issue 28's bound: the forwarding and hits rows with
// the history on at most 5 % below the same rows with it off.
const maxHistoryLoss = 0.05

// historyRuns are the history rows: each nil when not measured.
type historyRuns struct {
	fwd, hits *historyRun
	rate      *historyRun // forwarding at -history-qps
	pgVersion string      // the PostgreSQL server's version (-history-store postgres); "" with SQLite
}

// historyRun is one row with the history on and what its history counted.
// The forwarding and hits rows are measured side by side (pairs.go): a
// with the history off, b with it on, in two processes beside each
// other, fresh ones for every pair (b's in the same file or database);
// run is then b's median run and the counts and PostgreSQL's CPU are
// over every b run. The -history-qps row is one run (pairs nil).
type historyRun struct {
	run              *fwdRun
	pairs            *pairRuns
	rows, dropped    uint64
	countsKnown      bool // both series were read
	file             string
	rowsBeforeRunner uint64 // written before the pairs' runs (the readiness queries, the warm-ups)

	// With PostgreSQL: the server's processes' CPU time over the run
	// (pgCPU, treeCPU; pgCPUKnown when both readings were made), and the
	// rows in the row's database once nxdnsd had stopped (dbRows; dbErr
	// why they could not be counted).
	pgCPU      time.Duration
	pgCPUKnown bool
	dbRows     int64
	dbErr      error
}

// cpuPerQuery is the row's CPU per query answered, in µs: nxdnsd's, and
// with PostgreSQL the server's too (it runs on the same machine); ok is
// false when a figure is missing.
func (h *historyRun) cpuPerQuery(pg bool) (us float64, ok bool) {
	if !pg {
		return h.run.cpuPerQuery()
	}
	cpu, completed := h.onTotals()
	if !h.pgCPUKnown || completed == 0 || cpu <= 0 {
		return 0, false
	}
	return perQueryUS(cpu+h.pgCPU, completed), true
}

// onTotals is nxdnsd's CPU time and the queries answered over every run
// with the history on: the one run, or each pair's b.
func (h *historyRun) onTotals() (cpu time.Duration, completed int) {
	if h.pairs == nil {
		return h.run.cpu, h.run.perf.Completed
	}
	for _, r := range h.pairs.b {
		cpu, completed = cpu+r.cpu, completed+r.perf.Completed
	}
	return cpu, completed
}

// ratio is the row's QPS with the history on over it off: the pairs'
// median, or against off (the throughput or hits table's row) for a row
// measured once.
func (h *historyRun) ratio(off *fwdRun) float64 {
	if h.pairs != nil {
		return h.pairs.ratio()
	}
	return h.run.perf.QPS / off.perf.QPS
}

// historyQPSLength is the rate-limited row's length: -history-qps-l, or
// -l when that is 0.
func (c runConfig) historyQPSLength() time.Duration {
	if c.historyQPSLen > 0 {
		return c.historyQPSLen
	}
	return c.perf.Duration
}

// measureHistory runs the history rows after the others, in the same run
// and against the same fakes: a fresh nxdnsd with the history in a new
// file (or, with -history-store postgres, a new database) for each row,
// its cache as the row's without.
func measureHistory(ctx context.Context, c runConfig, dir string, t *throughput, primary, secondary *fake.Server,
	upstream func() uint64, progress func(string, ...any)) (*historyRuns, error) {
	hr := &historyRuns{}
	var pg *pgHistory
	if c.historyStore == storePostgres {
		progress("starting PostgreSQL on loopback for the history rows (fsync on)")
		var err error
		if pg, err = startPGHistory(ctx); err != nil {
			return nil, err
		}
		defer pg.close()
		hr.pgVersion = pg.version
	}
	// one measures a row with the history on, side by side with it off
	// in a process beside (paired), or once.
	one := func(name, queries string, cache bool, c runConfig, paired bool) (*historyRun, error) {
		conf, err := c.nxdnsdConf(primary, secondary, 32, "")
		if err != nil {
			return nil, err
		}
		conf.Cache = t.cache.enabled(cache)
		h := &historyRun{}
		if pg != nil {
			if conf.HistoryPostgres, err = pg.newDB(name); err != nil {
				return nil, err
			}
			conf.HistoryInstance = name
			h.file = conf.HistoryPostgres
		} else {
			conf.HistoryPath = filepath.Join(dir, name+".db")
			h.file = conf.HistoryPath
		}
		startOn := func(i int) (*child, error) {
			n := name
			if paired {
				n = fmt.Sprintf("%s-%d", name, i+1)
			}
			return startChild(ctx, c.nxdnsd, dir, n, conf)
		}
		// counted adds what nx's history counted to h's counts, once its
		// runs are over.
		counted := func(nx *child, before, droppedBefore uint64) {
			// The writer may still hold the last batch: a scrape now counts
			// it as neither written nor dropped, which the report says.
			rows, okR := nx.metric(ctx, "nxdns_history_rows_total")
			dropped, okD := nx.metric(ctx, "nxdns_history_dropped_total")
			h.rows += rows - before
			h.dropped += dropped - droppedBefore
			h.rowsBeforeRunner += before
			h.countsKnown = h.countsKnown && okR && okD
		}
		h.countsKnown = true
		var pgBefore time.Duration
		var pgErr error
		if pg != nil {
			pgBefore, pgErr = pg.cpu()
		}
		if paired {
			procs := func(i int) (a, b *child, stop func(), err error) {
				offConf, err := c.nxdnsdConf(primary, secondary, 32, "")
				if err != nil {
					return nil, nil, nil, err
				}
				offConf.Cache = conf.Cache
				if a, err = startChild(ctx, c.nxdnsd, dir, fmt.Sprintf("%s-off-%d", name, i+1), offConf); err != nil {
					return nil, nil, nil, err
				}
				if b, err = startOn(i); err != nil {
					a.stop()
					return nil, nil, nil, err
				}
				if err := warmUp(ctx, c, queries, a, b); err != nil {
					a.stop()
					b.stop()
					return nil, nil, nil, err
				}
				// The warm-up's rows are written or dropped by now, or
				// counted as neither (the report says how many).
				before, _ := b.metric(ctx, "nxdns_history_rows_total")
				droppedBefore, _ := b.metric(ctx, "nxdns_history_dropped_total")
				return a, b, func() {
					a.stop()
					counted(b, before, droppedBefore)
					b.stop() // it writes what it holds before it exits
				}, nil
			}
			label := fmt.Sprintf("%s, a: the history off, b: on in %s", name, h.file)
			if h.pairs, err = measurePairs(ctx, c, c.pairs, procs, queries, queries, upstream, progress, label); err != nil {
				return nil, err
			}
			h.run = h.pairs.medianB()
		} else {
			nx, err := startOn(0)
			if err != nil {
				return nil, err
			}
			before, _ := nx.metric(ctx, "nxdns_history_rows_total")
			progress("%s, the history on in %s: dnsperf %s -> nxdnsd %s", name, h.file, c.perf, nx.addr)
			h.run, err = measure(ctx, c, nx, nx.addr, queries, upstream, nil)
			if err == nil {
				counted(nx, before, 0)
			}
			nx.stop() // it writes what it holds before it exits
			if err != nil {
				return nil, err
			}
		}
		if pg != nil {
			after, err := pg.cpu()
			h.pgCPU, h.pgCPUKnown = after-pgBefore, err == nil && pgErr == nil
			h.dbRows, h.dbErr = countRows(ctx, conf.HistoryPostgres)
		}
		return h, nil
	}
	var err error
	if hr.fwd, err = one("throughput-history", filepath.Join(dir, "queries.txt"), c.forwardCache, c, true); err != nil {
		return nil, err
	}
	if t.hits != nil && t.hits.nx != nil {
		if hr.hits, err = one("hits-history", filepath.Join(dir, "hits.txt"), true, c, true); err != nil {
			return nil, err
		}
	}
	if c.historyQPS > 0 {
		rc := c
		rc.perf.MaxQPS = c.historyQPS
		rc.perf.Duration = c.historyQPSLength()
		if hr.rate, err = one("rate-history", filepath.Join(dir, "queries.txt"), c.forwardCache, rc, false); err != nil {
			return nil, err
		}
	}
	return hr, nil
}

// writeHistory is the history rows' table: each row with the history on
// beside the same row with it off. With PostgreSQL the rows' CPU per
// query counts the server's processes too, in a column of their own as
// well, and the rows counted in each row's database.
func (r *report) writeHistory(b *strings.Builder, t *throughput) {
	hr := t.history
	pg := r.cfg.historyStore == storePostgres
	if pg {
		fmt.Fprintf(b, "\n### Query history: on, in PostgreSQL (issue 32), dnsperf %s, UDP\n\n", r.cfg.perf)
		fmt.Fprintf(b, "| row | history off: QPS | CPU per query | history on: QPS | CPU per query, nxdnsd + PostgreSQL | of which PostgreSQL | on / off: median (the pairs) | rows written | rows dropped | rows in the database |\n")
		fmt.Fprintf(b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	} else {
		fmt.Fprintf(b, "\n### Query history: on, in a file (issue 28), dnsperf %s, UDP\n\n", r.cfg.perf)
		fmt.Fprintf(b, "| row | history off: QPS | CPU per query | history on: QPS | CPU per query | on / off: median (the pairs) | rows written | rows dropped |\n")
		fmt.Fprintf(b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	}
	// on's columns after its QPS: CPU per query (and PostgreSQL's), then
	// after the ratio the rows written and dropped (and in the database).
	cpu := func(on *historyRun) string {
		us, ok := on.cpuPerQuery(pg)
		s := "?"
		if ok {
			s = fmt.Sprintf("%.1f µs", us)
		}
		if pg {
			of := "?"
			if _, completed := on.onTotals(); on.pgCPUKnown && completed > 0 {
				of = fmt.Sprintf("%.1f µs", perQueryUS(on.pgCPU, completed))
			}
			s += " | " + of
		}
		return s
	}
	counts := func(on *historyRun) string {
		written, dropped := "?", "?"
		if on.countsKnown {
			written, dropped = thousands(float64(on.rows)), thousands(float64(on.dropped))
		}
		s := written + " | " + dropped
		if pg {
			db := "?"
			if on.dbErr == nil {
				db = thousands(float64(on.dbRows))
			}
			s += " | " + db
		}
		return s
	}
	dashes := strings.Repeat(" – |", 7)
	if pg {
		dashes = strings.Repeat(" – |", 9)
	}
	row := func(name string, off *fwdRun, on *historyRun) {
		if on != nil && on.pairs != nil {
			off = on.pairs.medianA()
		}
		if off == nil || on == nil {
			fmt.Fprintf(b, "| %s |%s\n", name, dashes)
			return
		}
		ratio := fmt.Sprintf("%.3f", on.ratio(off))
		if on.pairs != nil {
			ratio += " (" + on.pairs.ratiosText() + ")"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", name, thousands(off.perf.QPS), usPerQuery(off),
			thousands(on.run.perf.QPS), cpu(on), ratio, counts(on))
	}
	row(fmt.Sprintf("forwarding: %s names", thousands(float64(r.cfg.names))), t.nx, hr.fwd)
	var hits *fwdRun
	if t.hits != nil {
		hits = t.hits.nx
	}
	row(fmt.Sprintf("hits: %s names over and over", thousands(float64(r.cfg.hitNames))), hits, hr.hits)
	if x := hr.rate; x != nil {
		name := fmt.Sprintf("forwarding at dnsperf -Q %d", r.cfg.historyQPS)
		if l := r.cfg.historyQPSLength(); l != r.cfg.perf.Duration {
			name += fmt.Sprintf(" -l %s", l)
		}
		fmt.Fprintf(b, "| %s | – | – | %s | %s | – | %s |\n", name, thousands(x.run.perf.QPS), cpu(x), counts(x))
	}
	if pg {
		fmt.Fprintf(b, "\n"+pairedText+
			"The history is `[history] postgres`, a new database for each row "+
			"on a throwaway PostgreSQL %s server on loopback (this machine; initdb's defaults, fsync on; nxdnsd's sessions commit with synchronous_commit off, "+
			"its default when the connection string does not set it), `instance` the row's name. "+
			"Their CPU per query is nxdnsd's plus the PostgreSQL server's processes' over the run (user and system time of the postmaster and its children, "+
			"those that ended included: /proc/PID/stat utime, stime, cutime and cstime). "+
			"Rows written and dropped are nxdns_history_rows_total and nxdns_history_dropped_total scraped right after dnsperf ended "+
			"(written: less the readiness queries'; a batch still being written then is in neither); "+
			"rows in the database are counted once nxdnsd has stopped (it writes what it holds first), readiness queries included.\n", hr.pgVersion)
		return
	}
	fmt.Fprintf(b, "\n"+pairedText+
		"The history is `[history] path`, a new file in the work directory for each row. "+
		"Rows written and dropped are nxdns_history_rows_total and nxdns_history_dropped_total scraped right after dnsperf ended "+
		"(written: less the readiness queries'); a batch still being written then is in neither.\n")
}

// pairedText says how the history rows were measured.
const pairedText = "The forwarding and hits rows are each measured at two fresh nxdnsd processes running beside each other with the same settings, " +
	"one with the history off (`[history] enabled = false`) and one with it on: dnsperf at one, then the other, then the other way round, -pairs times each. " +
	"Their QPS and CPU columns are each side's median run; the ratio is the median of the pairs' ratios, listed in pair order; " +
	"the rows written and dropped are over every run with the history on. The -history-qps row is one run. "

// verdictHistory is issue 28's check, or with PostgreSQL issue 32's: the
// forwarding row with the history on at most maxHistoryLoss below it
// off; no row dropped at -history-qps (with PostgreSQL: and every query
// answered has its row in the database); the hits row within
// maxHistoryLoss (drops there are counted, not a failure; with
// PostgreSQL not checked: issue 32 bounds the forwarding row alone).
func (r *report) verdictHistory(check func(bool, string, ...any), notChecked func(string, ...any), t *throughput) {
	hr := t.history
	if r.cfg.historyStore == storePostgres {
		r.verdictHistoryPG(check, notChecked, t)
		return
	}
	if on := hr.fwd; on != nil {
		ratio := on.ratio(t.nx)
		check(ratio >= 1-maxHistoryLoss, "issue 28, forwarding with the history on: %.3f of the QPS with it off >= %.2f (rows dropped: %d)",
			ratio, 1-maxHistoryLoss, on.dropped)
	}
	if x := hr.rate; x != nil {
		check(x.countsKnown && x.dropped == 0 && x.run.perf.QPS >= 0.95*float64(r.cfg.historyQPS),
			"issue 28, forwarding at dnsperf -Q %d for %s: %s queries/s answered, nxdns_history_dropped_total %d, want 0",
			r.cfg.historyQPS, r.cfg.historyQPSLength(), thousands(x.run.perf.QPS), x.dropped)
	}
	if t.hits == nil || t.hits.nx == nil || hr.hits == nil {
		notChecked("issue 28, hits with the history on: no hits row")
		return
	}
	ratio := hr.hits.ratio(t.hits.nx)
	check(ratio >= 1-maxHistoryLoss, "issue 28, hits with the history on: %.3f of the QPS with it off >= %.2f (rows dropped: %d, counted)",
		ratio, 1-maxHistoryLoss, hr.hits.dropped)
}

// verdictHistoryPG is issue 32's check: the forwarding row with
// history.postgres at most maxHistoryLoss below it off, and at
// -history-qps no row lost: none dropped, and the database holding a row
// for every query answered.
func (r *report) verdictHistoryPG(check func(bool, string, ...any), notChecked func(string, ...any), t *throughput) {
	hr := t.history
	if on := hr.fwd; on != nil {
		ratio := on.ratio(t.nx)
		check(ratio >= 1-maxHistoryLoss, "issue 32, forwarding with history.postgres: %.3f of the QPS with the history off >= %.2f (rows dropped: %d)",
			ratio, 1-maxHistoryLoss, on.dropped)
	}
	if x := hr.rate; x != nil {
		db := "not counted"
		if x.dbErr == nil {
			db = thousands(float64(x.dbRows))
		}
		check(x.countsKnown && x.dropped == 0 && x.dbErr == nil && x.dbRows >= int64(x.run.perf.Completed) &&
			x.run.perf.QPS >= 0.95*float64(r.cfg.historyQPS),
			"issue 32, forwarding at dnsperf -Q %d for %s with history.postgres: %s queries/s answered, nxdns_history_dropped_total %d (want 0), "+
				"%s rows in the database for %s queries answered (want at least as many)",
			r.cfg.historyQPS, r.cfg.historyQPSLength(), thousands(x.run.perf.QPS), x.dropped, db, thousands(float64(x.run.perf.Completed)))
	}
	if hr.hits != nil {
		notChecked("issue 32, hits with history.postgres: shown, not checked (issue 32 bounds the forwarding rows alone)")
	}
}

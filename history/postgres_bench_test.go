package history_test

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/history"
	"github.com/nxdnsd/nxdnsd/history/historytest"
	"github.com/nxdnsd/nxdnsd/internal/pgserver"
)

// durablePG starts a PostgreSQL server with its production durability
// (fsync and synchronous_commit on, unlike the tests' pgtest), for the
// writer's benchmarks: what a commit costs is part of what they measure.
func durablePG(b *testing.B) *pgserver.Server {
	b.Helper()
	s, err := pgserver.Start(pgserver.Options{Durable: true})
	if errors.Is(err, pgserver.ErrNotInstalled) {
		b.Skip("prerequisite missing: initdb not installed")
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	return s
}

// pgRows are the generator's rows with every name new, as in
// nxdnsbench's forwarding row (a million names).
func pgRows() []history.Row {
	now := time.Now()
	rows := slices.Collect(historytest.Network{Seed: 1}.Rows(now.Add(-time.Hour), now, 200000))
	for i := range rows {
		rows[i].QName = "n" + strconv.Itoa(i) + ".example."
	}
	return rows
}

// pgCPU reports the CPU per row of this process (the writer, Record's
// share included) and of the PostgreSQL server's processes, which run on
// the same machine.
func pgCPU(b *testing.B, s *pgserver.Server, self0, server0 time.Duration, rows int) {
	server, err := s.CPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64((cpuTime(b)-self0).Nanoseconds())/1000/float64(rows), "cpu-µs/row")
	b.ReportMetric(float64((server-server0).Nanoseconds())/1000/float64(rows), "pg-cpu-µs/row")
}

// The PostgreSQL writer from a full queue: rows/s and the CPU per row of
// both sides, batches as the writer makes them.
func BenchmarkPostgresWriter(b *testing.B) {
	s := durablePG(b)
	rows := pgRows()
	h := openPostgres(b, s.URL(), "bench")
	defer h.Close()
	const op = history.QueueSize / 2
	b.ResetTimer()
	self0 := cpuTime(b)
	server0, err := s.CPU()
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	var slowest time.Duration
	for b.Loop() {
		start := time.Now()
		for range op {
			h.Record(rows[n%len(rows)])
			n++
		}
		h.Sync()
		slowest = max(slowest, time.Since(start))
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
	pgCPU(b, s, self0, server0, n)
	b.ReportMetric(float64(slowest.Milliseconds()), "slowest-op-ms")
	if h.Dropped() != 0 {
		b.Errorf("%d rows dropped", h.Dropped())
	}
}

// The PostgreSQL writer at the daemon's pace: 20 rows every millisecond
// (issue 32's 20,000 queries a second), half a second an op
// (-benchtime 120x is the 60 s); dropped must stay 0.
func BenchmarkPostgresWriterSteady(b *testing.B) {
	s := durablePG(b)
	rows := pgRows()
	h := openPostgres(b, s.URL(), "bench")
	defer h.Close()
	const perTick, ticks = 20, 500
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	self0 := cpuTime(b)
	server0, err := s.CPU()
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		for range ticks {
			<-tick.C
			for range perTick {
				h.Record(rows[n%len(rows)])
				n++
			}
		}
	}
	h.Sync()
	pgCPU(b, s, self0, server0, n)
	b.ReportMetric(float64(h.Dropped()), "dropped")
}

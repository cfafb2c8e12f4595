package history

import (
	"context"
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/internal/pgserver"
)

// What a batch's COPY costs the PostgreSQL server a row, with the schema,
// with the primary key it had before migration 3, and with each of its
// indexes left out: the server's share of the history's cost, and what
// each index costs of it. Each op is one batch
// of 2,000 rows (the writer's at 20,000 queries a second), every name
// new, into a durable server of the benchmark's own (fsync on), a
// database per variant. cpu-µs/row is this process's, the making of
// the rows included.
func BenchmarkPostgresCopy(b *testing.B) {
	s, err := pgserver.Start(pgserver.Options{Durable: true})
	if errors.Is(err, pgserver.ErrNotInstalled) {
		b.Skip("prerequisite missing: initdb not installed")
	}
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	dbs := 0 // a database for each run of a variant (-count runs each again)
	for _, v := range []struct {
		name  string
		alter []string
	}{
		{"schema", nil},
		{"with-primary-key", []string{`ALTER TABLE nxdns_history ADD PRIMARY KEY (id)`}}, // the schema before migration 3
		{"without-instance-index", []string{`DROP INDEX nxdns_history_instance_ts`}},
		{"without-time-index", []string{`DROP INDEX nxdns_history_ts`}},
		{"no-index", []string{`DROP INDEX nxdns_history_instance_ts`, `DROP INDEX nxdns_history_ts`}},
		{"brin-time", []string{`DROP INDEX nxdns_history_instance_ts`, `DROP INDEX nxdns_history_ts`,
			`CREATE INDEX nxdns_history_ts_brin ON nxdns_history USING brin (ts) WITH (pages_per_range = 32, autosummarize = on)`}},
		{"brin-multi", []string{`DROP INDEX nxdns_history_instance_ts`, `DROP INDEX nxdns_history_ts`,
			`CREATE INDEX nxdns_history_ts_brin ON nxdns_history USING brin (ts timestamptz_minmax_multi_ops) WITH (pages_per_range = 32, autosummarize = on)`}},
		{"btree-ts", []string{`DROP INDEX nxdns_history_instance_ts`, `DROP INDEX nxdns_history_ts`,
			`CREATE INDEX nxdns_history_ts_only ON nxdns_history (ts)`}},
		{"brin-no-identity", []string{`DROP INDEX nxdns_history_instance_ts`, `DROP INDEX nxdns_history_ts`,
			`CREATE INDEX nxdns_history_ts_brin ON nxdns_history USING brin (ts) WITH (pages_per_range = 32, autosummarize = on)`,
			`ALTER TABLE nxdns_history ALTER COLUMN id DROP IDENTITY, ALTER COLUMN id DROP NOT NULL`}},
	} {
		b.Run(v.name, func(b *testing.B) {
			dbs++
			url, err := s.CreateDB("copy" + strconv.Itoa(dbs))
			if err != nil {
				b.Fatal(err)
			}
			st, warn, err := openPostgres(url, "edge-1")
			if err != nil || warn != nil {
				b.Fatal(err, warn)
			}
			defer st.close()
			for _, q := range v.alter {
				if _, err := st.pool.Exec(context.Background(), q); err != nil {
					b.Fatal(q, err)
				}
			}
			rows := make([]Row, 2000)
			n := 0
			server0, err := s.CPU()
			if err != nil {
				b.Fatal(err)
			}
			self0 := ownCPU()
			for b.Loop() {
				for i := range rows {
					rows[i] = someRow(0)
					rows[i].QName = "n" + strconv.Itoa(n) + ".example."
					n++
				}
				if err := st.write(rows); err != nil {
					b.Fatal(err)
				}
			}
			server, err := s.CPU()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64((server-server0).Nanoseconds())/1000/float64(n), "pg-cpu-µs/row")
			b.ReportMetric(float64((ownCPU()-self0).Nanoseconds())/1000/float64(n), "cpu-µs/row")
			b.ReportMetric(0, "ns/op") // the op's wall time follows the machine's load
		})
	}
}

// ownCPU is the process's CPU time, user and system.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

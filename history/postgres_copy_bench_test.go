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

// What a batch's COPY costs the PostgreSQL server a row, with the schema
// (a BRIN minmax-multi on the time), with the b-trees it had before
// migration 4, with a plain minmax BRIN, and with no index: the server's
// share of the history's cost, and what its index costs of it. Each op is one batch
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
		// The b-trees of schemas 1 to 3, which migration 4 replaced.
		{"time-and-instance-b-trees", []string{`DROP INDEX nxdns_history_ts_brin`,
			`CREATE INDEX nxdns_history_ts ON nxdns_history (ts, id)`,
			`CREATE INDEX nxdns_history_instance_ts ON nxdns_history (instance, ts, id)`}},
		{"time-b-tree", []string{`DROP INDEX nxdns_history_ts_brin`, `CREATE INDEX nxdns_history_ts ON nxdns_history (ts)`}},
		{"brin-minmax", []string{`DROP INDEX nxdns_history_ts_brin`,
			`CREATE INDEX nxdns_history_ts_brin ON nxdns_history USING brin (ts) WITH (pages_per_range = 32, autosummarize = on)`}},
		{"no-index", []string{`DROP INDEX nxdns_history_ts_brin`}},
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

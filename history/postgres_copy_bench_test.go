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
// (a batch one row of arrays, migration 4) and without its index: the
// server's share of the history's cost. Schemas 1 to 3, a row a row
// with b-trees on the time and on the instance and time, cost it 5.2 to
// 6.4 µs a row on the machine of BENCHMARKS.md's figures. Each op is one batch
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
		// Without the batches' index: what the index costs.
		{"no-index", []string{`DROP INDEX nxdns_history_batches_ts`}},
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

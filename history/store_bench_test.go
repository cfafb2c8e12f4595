package history

import (
	"net/netip"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkStoreWrite is the SQLite store's write alone, batches of 2,000
// rows back to back: what the writer spends on a batch at 20,000 rows a
// second (100 ms batches), without the queue, the budget or the ticks,
// so that a profile holds enough of its samples to split it. The rows:
// 40 clients, a name in ten new, the rest from 2,000, three upstreams.
func BenchmarkStoreWrite(b *testing.B) {
	s, err := openSQLite(filepath.Join(b.TempDir(), "h.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	const batch = 2000
	names := make([]string, 2000)
	for i := range names {
		names[i] = "site" + strconv.Itoa(i) + ".example."
	}
	upstreams := []string{"quad9", "cloudflare", "router"}
	clients := make([]netip.Addr, 40)
	for i := range clients {
		clients[i] = netip.AddrFrom4([4]byte{192, 168, 1, byte(10 + i)})
	}
	fresh := make([]string, 0, 1<<16)
	for i := range cap(fresh) {
		fresh = append(fresh, "new"+strconv.Itoa(i)+".example.")
	}
	rows := make([]Row, batch)
	start := time.Now().Add(-time.Hour)
	n := 0
	b.ResetTimer()
	for b.Loop() {
		for i := range rows {
			n++
			name := names[(n*7919)%len(names)]
			if n%10 == 0 {
				name = fresh[n%len(fresh)]
			}
			rows[i] = Row{Time: start.Add(time.Duration(n) * 50 * time.Microsecond), Client: clients[n%len(clients)], Proto: "udp",
				QName: name, QType: 1, Source: "pool", Upstream: upstreams[n%3], Duration: 3 * time.Millisecond}
		}
		if err := s.write(rows); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/float64(n), "µs/row")
}

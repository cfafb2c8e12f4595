package history_test

import (
	"bufio"
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/history"
	"github.com/nxdnsd/nxdnsd/history/historytest"
)

// The writer alone: rows/s from a full queue into a database file,
// batches as the writer makes them. The rows are made beforehand.
func BenchmarkWriter(b *testing.B) {
	net := historytest.Network{Seed: 1}
	now := time.Now()
	rows := slices.Collect(net.Rows(now.Add(-time.Hour), now, 200000))
	// The writer's own speed: without its budget of writerShare.
	cfg := config.Default().History
	cfg.Path = filepath.Join(b.TempDir(), "h.db")
	h, err := history.OpenWithoutBudget(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	n := 0
	for b.Loop() {
		for _, r := range rows[n%len(rows) : n%len(rows)+history.QueueSize/2] {
			h.Record(r)
		}
		n += history.QueueSize / 2
		if n%len(rows)+history.QueueSize/2 > len(rows) {
			n = 0
		}
		h.Sync()
	}
	b.ReportMetric(float64(b.N*history.QueueSize/2)/b.Elapsed().Seconds(), "rows/s")
	// The process's CPU per row (Record's share included, the row
	// generation not): on a shared machine rows/s follows the load, this
	// far less.
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/1000/float64(b.N*history.QueueSize/2), "cpu-µs/row")
	if h.Dropped() != 0 {
		b.Errorf("%d rows dropped", h.Dropped())
	}
}

// The writer at the daemon's pace: 20 rows every millisecond (20,000
// rows/s, the rate), so that the writer makes the batches it makes
// in use rather than full ones. cpu-µs/row is what the history costs the
// process per query at that rate.
func BenchmarkWriterSteady(b *testing.B) {
	b.Run("network", func(b *testing.B) { writerSteady(b, false) })
	// Every name new, as in nxdnsbench's forwarding row (a million names).
	b.Run("new-names", func(b *testing.B) { writerSteady(b, true) })
}

func writerSteady(b *testing.B, fresh bool) {
	net := historytest.Network{Seed: 1}
	now := time.Now()
	rows := slices.Collect(net.Rows(now.Add(-time.Hour), now, 200000))
	if fresh {
		for i := range rows {
			rows[i].QName = "n" + strconv.Itoa(i) + ".example."
		}
	}
	h := open(b, filepath.Join(b.TempDir(), "h.db"))
	defer h.Close()
	const perTick, ticks = 20, 500 // half a second an op
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	cpu0 := cpuTime(b)
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
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/1000/float64(n), "cpu-µs/row")
	// The writer's own share of it: its batches' writes, as its budget
	// counts them (the process's CPU includes this loop's ticks).
	b.ReportMetric(float64(history.WriteCPU(h).Nanoseconds())/1000/float64(n), "writer-µs/row")
	b.ReportMetric(float64(h.Dropped()), "dropped")
}

// TestTenMillionRows is the acceptance measurement, run only with
// NXDNS_HISTORY_ROWS set (10000000 for the figures of BENCHMARKS.md): a
// week of a busy network written to NXDNS_HISTORY_DB (kept, and reused
// when it already holds the rows), then its size per row, the reads'
// times (the median of 7), the CPU time of a refresh of the dashboard's
// overview (overview) and the resident memory with it open.
func TestTenMillionRows(t *testing.T) {
	h, now, rssOff := tenMillionRows(t)
	srv := api(t, h)
	day := url.Values{"from": {strconv.FormatInt(now.Add(-24*time.Hour).Unix(), 10)}, "to": {strconv.FormatInt(now.Unix(), 10)}}
	cases := []struct {
		name, path string
		q          url.Values
	}{
		{"history name=site12", "/api/history", url.Values{"name": {"site12"}}},
		{"history name=tracker5", "/api/history", url.Values{"name": {"tracker5"}}},
		{"history name=nothing-matches", "/api/history", url.Values{"name": {"nothing-matches"}}},
		{"history client=192.168.1.30", "/api/history", url.Values{"client": {"192.168.1.30"}}},
		{"history client=192.168.1.49", "/api/history", url.Values{"client": {"192.168.1.49"}}},
		{"history client=host-10", "/api/history", url.Values{"client": {"host-10"}}},
		{"history (no filter)", "/api/history", url.Values{}},
		{"top domains 24h", "/api/stats/top", with(day, "what", "domains")},
		{"top blocked 24h", "/api/stats/top", with(day, "what", "blocked")},
		{"top clients 24h", "/api/stats/top", with(day, "what", "clients")},
		{"top upstreams 24h", "/api/stats/top", with(day, "what", "upstreams")},
		{"timeline 24h step 600", "/api/stats/timeline", with(day, "step", "600")},
		{"top domains (dashboard: to=now)", "/api/stats/top", url.Values{}},
		{"timeline (dashboard: to=now)", "/api/stats/timeline", url.Values{}},
	}
	for _, c := range cases {
		var times []time.Duration
		for range 7 {
			start := time.Now()
			resp, err := srv.Client().Get(srv.URL + c.path + "?" + c.q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			var body strings.Builder
			_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
			resp.Body.Close()
			times = append(times, time.Since(start))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d %s", c.name, resp.StatusCode, body.String())
			}
			if len(times) == 1 {
				t.Logf("%s: %d bytes of JSON", c.name, body.Len())
			}
		}
		slices.Sort(times)
		t.Logf("%-36s median %8.2f ms (min %.2f, max %.2f)", c.name, ms(times[3]), ms(times[0]), ms(times[6]))
	}
	overview(t, h, srv)
	_ = context.Background()
	after := rss(t)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("Go heap: %d KiB in use, %d KiB from the OS, %d KiB other runtime, %d GCs", ms.HeapInuse>>10, ms.HeapSys>>10, (ms.Sys-ms.HeapSys)>>10, ms.NumGC)
	runtime.GC()
	debug.FreeOSMemory()
	t.Logf("RSS: %d KiB before opening; with the database open and read %d KiB (+%d KiB), %d KiB after a GC (+%d KiB)", rssOff, after, after-rssOff, rss(t), rss(t)-rssOff)
}

// TestOverviewRefresh is TestTenMillionRows's measurement of the
// dashboard's overview alone (the same variables).
func TestOverviewRefresh(t *testing.T) {
	h, _, _ := tenMillionRows(t)
	overview(t, h, api(t, h))
}

// overviewRequests are the requests of one refresh of the dashboard's
// overview (refreshOverview in admin/status.html), in its order.
var overviewRequests = []string{
	"/api/stats/timeline?step=600",
	"/api/stats/top?what=domains&limit=10",
	"/api/stats/top?what=blocked&limit=10",
	"/api/stats/top?what=clients&limit=10",
	"/api/history?limit=200",
}

// overview measures what a refresh of the dashboard's overview costs: the
// process's CPU time for its five requests, one after the other, the
// median of 7 refreshes after a first one (which fills what the reads
// keep). Before each, the rows of the 15 s between two refreshes (the
// database's own rate: 10,000,000 rows a week) are written, outside the
// measurement: the reads find new rows each time (they stay in the file,
// 2,000 a run). The figure includes the HTTP client's share, in the same
// process, and the rollups' memory is logged after.
func overview(t *testing.T, h *history.History, srv *httptest.Server) {
	get := func(path string) {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body.String())
		}
	}
	arrive := func(seed uint64) {
		now := time.Now()
		for r := range (historytest.Network{Seed: seed}).Rows(now.Add(-15*time.Second), now, 250) {
			h.Record(r)
		}
		h.Sync()
	}
	arrive(100)
	cpu0, start := cpuTime(t), time.Now()
	for _, p := range overviewRequests {
		get(p)
	}
	t.Logf("overview refresh, the first: %.2f ms of CPU, %.2f ms", ms(cpuTime(t)-cpu0), ms(time.Since(start)))
	var total []time.Duration
	each := make([][]time.Duration, len(overviewRequests))
	for i := range 7 {
		arrive(101 + uint64(i))
		cpu0 := cpuTime(t)
		for j, p := range overviewRequests {
			c := cpuTime(t)
			get(p)
			each[j] = append(each[j], cpuTime(t)-c)
		}
		total = append(total, cpuTime(t)-cpu0)
	}
	slices.Sort(total)
	t.Logf("overview refresh: median %.2f ms of CPU (min %.2f, max %.2f)", ms(total[3]), ms(total[0]), ms(total[6]))
	for j, p := range overviewRequests {
		slices.Sort(each[j])
		t.Logf("  %-40s median %6.2f ms of CPU", p, ms(each[j][3]))
	}
	hours, keys, bytes := history.Rollups(h)
	t.Logf("rollups: %d closed hours, %d keys, about %d KiB", hours, keys, bytes>>10)
}

// tenMillionRows opens the history of TestTenMillionRows, writing it
// first when NXDNS_HISTORY_DB does not hold it yet; now is the end of
// its rows when it was written now, and rssOff the resident memory before
// it was opened.
func tenMillionRows(t *testing.T) (h *history.History, now time.Time, rssOff int) {
	count, _ := strconv.Atoi(os.Getenv("NXDNS_HISTORY_ROWS"))
	if count == 0 {
		t.Skip("set NXDNS_HISTORY_ROWS (and NXDNS_HISTORY_DB) to run")
	}
	path := os.Getenv("NXDNS_HISTORY_DB")
	if path == "" {
		path = filepath.Join(t.TempDir(), "history.db")
	}
	rssOff = rss(t)
	now = time.Now()
	cfg := config.Default().History
	cfg.Path, cfg.MaxMiB = path, 4096 // the rows must all fit: this measures their size
	if _, err := os.Stat(path); err != nil {
		h, err := history.OpenWithoutBudget(cfg) // as fast as it can: a generator
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		n := 0
		for r := range (historytest.Network{Seed: 7}).Rows(now.Add(-7*24*time.Hour+time.Hour), now, count) {
			h.Record(r)
			if n++; n%(history.QueueSize/2) == 0 {
				h.Sync()
			}
		}
		h.Sync()
		el := time.Since(start)
		t.Logf("wrote %d rows in %v: %.0f rows/s (generation included), %d dropped", h.Rows(), el, float64(h.Rows())/el.Seconds(), h.Dropped())
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	stored := storage(t, path)
	t.Logf("file %d bytes, %d rows: %.1f bytes per row", fi.Size(), stored, float64(fi.Size())/float64(stored))
	openStart := time.Now()
	h, err = history.Open(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	t.Logf("open (integrity check included): %v", time.Since(openStart))
	return h, now, rssOff
}

// storage logs what each table and index of the file at path takes, and
// returns the rows it holds.
func storage(t *testing.T, path string) int64 {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int64
	if err := db.QueryRow(`SELECT coalesce(sum(n), 0) FROM chunks`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	res, err := db.Query(`SELECT name, sum(pgsize), sum(unused) FROM dbstat GROUP BY name ORDER BY 2 DESC`)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	for res.Next() {
		var name string
		var size, unused int64
		if err := res.Scan(&name, &size, &unused); err != nil {
			t.Fatal(err)
		}
		t.Logf("  %-28s %11d bytes %6.2f per row (%4.1f %% unused)", name, size, float64(size)/float64(rows), 100*float64(unused)/float64(max(size, 1)))
	}
	return rows
}

func with(q url.Values, k, v string) url.Values {
	out := url.Values{}
	for kk, vv := range q {
		out[kk] = vv
	}
	out.Set(k, v)
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuTime is the process's CPU time, user and system.
func cpuTime(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Skip(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss is the process's resident memory in KiB.
func rss(t testing.TB) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

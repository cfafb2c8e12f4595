package daemon

import (
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// historyTOML is a [history] table on path ("" in memory).
func historyTOML(path string) string {
	return fmt.Sprintf("\n[history]\nenabled = true\npath = %q\n", path)
}

// historyRow is one row of GET /api/history.
type historyRow struct {
	TS         string  `json:"ts"`
	Client     *string `json:"client"`
	ClientName *string `json:"client_name"`
	Proto      *string `json:"proto"`
	QName      *string `json:"qname"`
	QType      *string `json:"qtype"`
	Rcode      string  `json:"rcode"`
	Source     *string `json:"source"`
	Upstream   *string `json:"upstream"`
	DurationMS float64 `json:"duration_ms"`
	List       *string `json:"list"`
}

// historyOf waits until the daemon's history has opened, writes what is
// queued, and returns every row of GET /api/history?query (newest first).
func (o *observed) historyOf(tb testing.TB, query string) []historyRow {
	tb.Helper()
	<-o.d.history.opened()
	h := o.d.history.current()
	if h == nil {
		tb.Fatal("no history open")
	}
	h.Sync()
	var page struct {
		Rows []historyRow `json:"rows"`
		Next *string      `json:"next"`
	}
	o.getJSON(tb, "/api/history?limit=1000&"+query, &page)
	if page.Next != nil {
		tb.Fatalf("more than 1000 rows")
	}
	return page.Rows
}

// Every source through the whole daemon is a row of /api/history with
// the fields of the query log, and the client's name, the list and the
// proto: special, local, forward_zone, pool, cache, stale, blocked,
// refused. The history is a file. The loop checks are kept out.
// The test waits (about a second) for a one-second TTL to run out, for
// the stale answer: time must pass, nothing is synchronised by it.
func TestHistoryEverySource(t *testing.T) {
	var silent atomic.Bool
	a := wiretest.A("stale.example.", 0)
	a.Hdr.Ttl = 1
	answer := wiretest.Answer()
	staleAnswer := wiretest.Answer(a)
	up := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		if strings.EqualFold(q.Question[0].Name, "stale.example.") {
			if silent.Load() {
				wiretest.Stall(w, q)
				return
			}
			staleAnswer(w, q)
			return
		}
		answer(w, q)
	})
	lan := wiretest.NewServer(t, wiretest.Answer())
	path := filepath.Join(t.TempDir(), "history.db")
	o := startObserved(t, "[server]\nallow = [\"127.0.0.1/32\"]\n"+upstreamTOML(up.Addr)+fmt.Sprintf(`
[cache]
enabled = true
stale_client_timeout_ms = 100
[blocking]
block = ["ads.example"]
[clients]
reverse_lookup = false
[[clients.static]]
name = "laptop"
addresses = ["127.0.0.1"]
[[forward_zones]]
zone = "lan."
resolver = %q
[[local_records]]
name = "printer.home."
type = "A"
value = "192.168.1.9"
`, lan.Addr)+historyTOML(path), false, options{})
	<-o.d.history.opened()

	ask(t, "udp", o.udp, wiretest.Query("localhost.", dns.TypeA))
	ask(t, "tcp", o.tcp, wiretest.Query("printer.home.", dns.TypeA))
	ask(t, "udp", o.udp, wiretest.Query("nas.lan.", dns.TypeAAAA))
	ask(t, "udp", o.udp, wiretest.Query("example.com.", dns.TypeA))
	ask(t, "tcp", o.tcp, wiretest.Query("example.com.", dns.TypeA))
	ask(t, "udp", o.udp, wiretest.Query("ads.example.", dns.TypeA))
	if r := askFrom(t, "udp", o.udp, "127.0.0.2", wiretest.Query("outside.example.", dns.TypeA)); r.Rcode != dns.RcodeRefused {
		t.Fatalf("from 127.0.0.2: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	ask(t, "udp", o.udp, ednsQuery("stale.example.", dns.TypeA))
	silent.Store(true)
	time.Sleep(1100 * time.Millisecond) // the TTL runs out
	if r := ask(t, "udp", o.udp, ednsQuery("stale.example.", dns.TypeA)); len(edeCodes(r)) != 1 || edeCodes(r)[0] != 3 {
		t.Fatalf("stale.example.: %v, want a stale answer (EDE 3)", r)
	}

	rows := o.historyOf(t, "")
	slices.Reverse(rows) // oldest first, as asked
	str := func(p *string) string {
		if p == nil {
			return "<null>"
		}
		return *p
	}
	want := []struct{ qname, proto, qtype, source, upstream, rcode, clientName, list string }{
		{"localhost.", "udp", "A", "special", "<null>", "NOERROR", "laptop", "<null>"},
		{"printer.home.", "tcp", "A", "local", "<null>", "NOERROR", "laptop", "<null>"},
		{"nas.lan.", "udp", "AAAA", "forward_zone", lan.Addr, "NOERROR", "laptop", "<null>"},
		{"example.com.", "udp", "A", "pool", "up0", "NOERROR", "laptop", "<null>"},
		{"example.com.", "tcp", "A", "cache", "<null>", "NOERROR", "laptop", "<null>"},
		{"ads.example.", "udp", "A", "blocked", "<null>", "NOERROR", "laptop", "rule"},
		{"outside.example.", "udp", "A", "refused", "<null>", "REFUSED", "<null>", "<null>"},
		{"stale.example.", "udp", "A", "pool", "up0", "NOERROR", "laptop", "<null>"},
		{"stale.example.", "udp", "A", "stale", "<null>", "NOERROR", "laptop", "<null>"},
	}
	var got [][]string
	for _, r := range rows {
		if strings.Contains(str(r.QName), "loop-check") {
			t.Errorf("a loop check is in the history: %s", str(r.QName))
			continue
		}
		got = append(got, []string{str(r.QName), str(r.Proto), str(r.QType), str(r.Source), str(r.Upstream), r.Rcode, str(r.ClientName), str(r.List)})
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		exp := []string{w.qname, w.proto, w.qtype, w.source, w.upstream, w.rcode, w.clientName, w.list}
		if !slices.Equal(got[i], exp) {
			t.Errorf("row %d: %v, want %v", i, got[i], exp)
		}
	}
	for i, r := range rows {
		client := "127.0.0.1"
		if str(r.Source) == "refused" {
			client = "127.0.0.2"
		}
		if str(r.Client) != client {
			t.Errorf("row %d: client %s, want %s (the address, without the port)", i, str(r.Client), client)
		}
		if ts, err := time.Parse(time.RFC3339Nano, r.TS); err != nil || time.Since(ts) > time.Minute {
			t.Errorf("row %d: ts %q (%v)", i, r.TS, err)
		}
	}

	// The filters combine through the daemon too: the client's name and
	// the source.
	if rs := o.historyOf(t, "client=laptop&source=cache"); len(rs) != 1 || str(rs[0].QName) != "example.com." {
		t.Errorf("client=laptop&source=cache: %d rows, want example.com.", len(rs))
	}

	fs := o.scrape(t)
	if v := metricValue(t, fs, "nxdns_history_rows_total"); v != float64(len(want)) {
		t.Errorf("nxdns_history_rows_total = %v, want %d", v, len(want))
	}
	if v := metricValue(t, fs, "nxdns_history_dropped_total"); v != 0 {
		t.Errorf("nxdns_history_dropped_total = %v, want 0", v)
	}
	if v := metricValue(t, fs, "nxdns_history_bytes"); v <= 0 {
		t.Errorf("nxdns_history_bytes = %v, want the file's size", v)
	}
}

// lockHistory takes SQLite's write lock on the database at path from a
// connection of the test's, as another process would: the history's
// writer cannot commit until the returned function releases it.
func lockHistory(tb testing.TB, path string) func() {
	tb.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`BEGIN EXCLUSIVE`); err != nil {
		db.Close()
		tb.Fatal(err)
	}
	var once atomic.Bool
	release := func() {
		if once.CompareAndSwap(false, true) {
			if _, err := db.Exec(`ROLLBACK`); err != nil {
				tb.Error(err)
			}
			db.Close()
		}
	}
	tb.Cleanup(release)
	return release
}

// A writer that cannot write (another process holds the database's write
// lock) delays no query: every one is answered, its row is dropped and
// counted in nxdns_history_dropped_total. Once the lock is gone rows are
// written again.
func TestHistoryStalledWriterDropsAndCounts(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	path := filepath.Join(t.TempDir(), "history.db")
	o := startObserved(t, upstreamTOML(up.Addr)+historyTOML(path), false, options{})
	<-o.d.history.opened()
	h := o.d.history.current()
	h.Sync() // the start-up maintenance is done: nothing of the writer's holds a lock

	release := lockHistory(t, path)
	const n = 40
	for i := range n {
		if r := ask(t, "udp", o.udp, wiretest.Query(fmt.Sprintf("q%d.example.", i), dns.TypeA)); r.Rcode != dns.RcodeSuccess {
			t.Fatalf("query %d: %s", i, dns.RcodeToString[r.Rcode])
		}
	}
	h.Sync() // every batch has failed by now
	fs := o.scrape(t)
	if v := metricValue(t, fs, "nxdns_history_dropped_total"); v != n {
		t.Errorf("nxdns_history_dropped_total = %v, want %d", v, n)
	}
	if v := metricValue(t, fs, "nxdns_history_rows_total"); v != 0 {
		t.Errorf("nxdns_history_rows_total = %v, want 0", v)
	}

	release()
	ask(t, "udp", o.udp, wiretest.Query("after.example.", dns.TypeA))
	rows := o.historyOf(t, "")
	if len(rows) != 1 || *rows[0].QName != "after.example." {
		t.Errorf("after the lock: %d rows, want after.example. alone", len(rows))
	}
}

// A restart on the same file keeps the rows: Shutdown writes what is
// queued and closes the database, the next daemon reads them.
func TestHistoryRestartKeepsRows(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	path := filepath.Join(t.TempDir(), "history.db")
	src := upstreamTOML(up.Addr) + historyTOML(path)

	first := startObserved(t, src, false, options{})
	<-first.d.history.opened()
	for i := range 5 {
		ask(t, "udp", first.udp, wiretest.Query(fmt.Sprintf("before%d.example.", i), dns.TypeA))
	}
	shutdown(t, first.started) // no Sync: Shutdown must write them

	second := startObserved(t, src, false, options{})
	<-second.d.history.opened() // the rows of the queries before are dropped and counted
	ask(t, "udp", second.udp, wiretest.Query("after.example.", dns.TypeA))
	var names []string
	for _, r := range second.historyOf(t, "") {
		names = append(names, *r.QName)
	}
	want := []string{"after.example.", "before4.example.", "before3.example.", "before2.example.", "before1.example.", "before0.example."}
	if !slices.Equal(names, want) {
		t.Errorf("rows after the restart: %v, want %v", names, want)
	}
}

// A file at history.path that is not a database is renamed aside and a
// new history started; DNS is served either way.
func TestHistoryGarbageFileRenamedAside(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	path := filepath.Join(t.TempDir(), "history.db")
	garbage := strings.Repeat("this is not a database\n", 500)
	if err := os.WriteFile(path, []byte(garbage), 0o600); err != nil {
		t.Fatal(err)
	}
	o := startObserved(t, upstreamTOML(up.Addr)+historyTOML(path), false, options{})
	if r := ask(t, "udp", o.udp, wiretest.Query("first.example.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("first query: %s", dns.RcodeToString[r.Rcode])
	}
	<-o.d.history.opened()
	asides, _ := filepath.Glob(path + ".damaged-*")
	if len(asides) != 1 {
		t.Fatalf("renamed aside: %v, want one file", asides)
	}
	if b, err := os.ReadFile(asides[0]); err != nil || string(b) != garbage {
		t.Errorf("the file renamed aside is not the garbage (%v)", err)
	}
	ask(t, "udp", o.udp, wiretest.Query("second.example.", dns.TypeA))
	rows := o.historyOf(t, "name=second")
	if len(rows) != 1 {
		t.Errorf("the new history has %d rows of second.example., want 1", len(rows))
	}
}

// With history.enabled = false the API answers 503 and the metrics read
// zero; a reload that turns it on opens it; a path that cannot be opened
// leaves it off (503, DNS served) and an unchanged reload tries it again.
func TestHistoryOffReloadOnAndRetry(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	dir := t.TempDir()
	obstacle := filepath.Join(dir, "sub")
	if err := os.WriteFile(obstacle, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "[server]\nlisten = [\"127.0.0.1:0\"]\n[admin]\nlisten = \"127.0.0.1:0\"\n" + upstreamTOML(up.Addr)
	o := startObserved(t, upstreamTOML(up.Addr)+"[history]\nenabled = false\n", false, options{})
	reload := func(src string) {
		t.Helper()
		if err := o.d.Reload(func() (*config.Config, error) { return config.Parse([]byte(withoutCacheOrHistory(src))) }); err != nil {
			t.Fatal(err)
		}
		<-o.d.history.opened()
	}
	off := func(when string) {
		t.Helper()
		for _, p := range []string{"/api/history", "/api/stats/top", "/api/stats/timeline"} {
			if code, body := o.get(t, p); code != http.StatusServiceUnavailable {
				t.Errorf("%s: %s: %d %s, want 503", when, p, code, body)
			}
		}
	}
	ask(t, "udp", o.udp, wiretest.Query("off.example.", dns.TypeA))
	off("history.enabled = false")
	if v := metricValue(t, o.scrape(t), "nxdns_history_dropped_total"); v != 0 {
		t.Errorf("history off: nxdns_history_dropped_total = %v, want 0", v)
	}

	// A path under a plain file cannot be opened.
	path := filepath.Join(obstacle, "history.db")
	reload(base + historyTOML(path))
	if r := ask(t, "udp", o.udp, wiretest.Query("unavailable.example.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("with the history unavailable: %s", dns.RcodeToString[r.Rcode])
	}
	off("history.path unavailable")
	if b, _ := os.ReadFile(obstacle); string(b) != "x" {
		t.Errorf("the file in the way was changed")
	}

	// The same configuration again, the obstacle gone: tried again.
	if err := os.Remove(obstacle); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(obstacle, 0o700); err != nil {
		t.Fatal(err)
	}
	reload(base + historyTOML(path))
	ask(t, "udp", o.udp, wiretest.Query("on.example.", dns.TypeA))
	rows := o.historyOf(t, "")
	if len(rows) != 1 || *rows[0].QName != "on.example." {
		t.Errorf("after the retry: %d rows, want on.example. alone", len(rows))
	}

	// [history] changed (in memory now): the file's history is closed,
	// its counts stay in the metrics.
	reload(base + historyTOML(""))
	ask(t, "udp", o.udp, wiretest.Query("memory.example.", dns.TypeA))
	rows = o.historyOf(t, "")
	if len(rows) != 1 || *rows[0].QName != "memory.example." {
		t.Errorf("in memory: %d rows, want memory.example. alone", len(rows))
	}
	if v := metricValue(t, o.scrape(t), "nxdns_history_rows_total"); v != 2 {
		t.Errorf("nxdns_history_rows_total = %v, want 2 (both histories')", v)
	}
}

// A reload that changes [history] but not its file reopens the same file:
// the history closed first writes what it queued and lets go of it, the
// new one has every row.
func TestHistoryReloadSameFile(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	path := filepath.Join(t.TempDir(), "history.db")
	src := func(days int) string {
		return "[server]\nlisten = [\"127.0.0.1:0\"]\n[admin]\nlisten = \"127.0.0.1:0\"\n" + upstreamTOML(up.Addr) +
			historyTOML(path) + fmt.Sprintf("retention_days = %d\n", days)
	}
	o := startObserved(t, upstreamTOML(up.Addr)+historyTOML(path)+"retention_days = 7\n", false, options{})
	<-o.d.history.opened()
	before := o.d.history.current()
	ask(t, "udp", o.udp, wiretest.Query("before.example.", dns.TypeA))
	if err := o.d.Reload(func() (*config.Config, error) { return config.Parse([]byte(withoutCacheOrHistory(src(3)))) }); err != nil {
		t.Fatal(err)
	}
	<-o.d.history.opened()
	if h := o.d.history.current(); h == nil || h == before {
		t.Fatalf("after the reload: history %p, want a new one (was %p)", h, before)
	}
	ask(t, "udp", o.udp, wiretest.Query("after.example.", dns.TypeA))
	var names []string
	for _, r := range o.historyOf(t, "") {
		names = append(names, *r.QName)
	}
	if want := []string{"after.example.", "before.example."}; !slices.Equal(names, want) {
		t.Errorf("rows: %v, want %v", names, want)
	}
}

package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/internal/pgtest"
)

func pgOpen(t *testing.T, url, instance string) *pgStore {
	t.Helper()
	st, warn, err := openPostgres(url, instance)
	if err != nil || warn != nil {
		t.Fatalf("openPostgres: %v, %v", err, warn)
	}
	return st
}

func pgCount(t *testing.T, st *pgStore) int64 {
	t.Helper()
	var n int64
	if err := st.pool.QueryRow(context.Background(), `SELECT count(*) FROM nxdns_history`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func someRow(i int) Row {
	return Row{
		Time: time.Now().Add(-time.Duration(i) * time.Millisecond), Client: netip.MustParseAddr("192.0.2.7"),
		Proto: "udp", QName: "Example.COM.", QType: 1, Source: "pool", Upstream: "quad9", Duration: 1234 * time.Microsecond,
	}
}

// The database stopped under load: no Record waits; the batch in hand
// and a queue's worth of rows wait for it, and every row past them is
// dropped and counted, exactly; the API answers 503 meanwhile; after the
// restart the writer reconnects on its own and writes every row that
// waited. (The outage lasts as long as the test takes to fill the
// queue: the behaviour does not depend on its length.)
func TestPostgresOutageBuffersThenDrops(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	st := pgOpen(t, pg.URL(), "edge-1")
	const queue = 1000
	down := make(chan int, 1)
	cfg := config.Default().History
	cfg.Instance = "edge-1"
	h := startWith(st, cfg, zap.NewNop(), time.Now, options{queue: queue, retryMin: 5 * time.Millisecond, retryMax: 50 * time.Millisecond, down: down})
	defer h.Close()
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for i := range 100 {
		h.Record(someRow(i))
	}
	h.Sync()
	if h.Rows() != 100 || pgCount(t, st) != 100 {
		t.Fatalf("%d rows written, %d in the database, want 100", h.Rows(), pgCount(t, st))
	}

	// Another replica, idle through the outage: its pool keeps a
	// connection the restart will have killed.
	other := pgOpen(t, pg.URL(), "edge-2")
	defer other.close()
	if _, err := other.rows(context.Background(), filter{Rcode: -1, Limit: 1}); err != nil {
		t.Fatal(err)
	}

	pg.Stop()
	h.Record(someRow(0))
	held := <-down // the writer holds this batch for the database
	const extra = 500
	for i := range queue + extra {
		h.Record(someRow(i))
	}
	if got := h.Dropped(); got != extra {
		t.Errorf("dropped %d rows while the database was down, want %d (the rows past the queue)", got, extra)
	}
	resp, err := srv.Client().Get(srv.URL + "/api/history")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/api/history with the database down: %d, want 503", resp.StatusCode)
	}

	pg.Restart()
	h.Sync() // returns once the held batch and the queue are written
	want := int64(100 + held + queue)
	if h.Rows() != uint64(want) || pgCount(t, st) != want {
		t.Errorf("after the restart %d rows written, %d in the database, want %d", h.Rows(), pgCount(t, st), want)
	}
	if h.Dropped() != extra {
		t.Errorf("dropped %d, want %d: rows that waited were lost", h.Dropped(), extra)
	}
	if p, err := other.rows(context.Background(), filter{Instance: "edge-1", Rcode: -1, Limit: 10}); err != nil || len(p.Rows) != 10 {
		t.Errorf("the idle replica's first read after the restart: %d rows, %v", len(p.Rows), err)
	}
	resp, err = srv.Client().Get(srv.URL + "/api/history")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/api/history after the restart: %d, want 200", resp.StatusCode)
	}
}

// A database of the first schema version, with rows, is brought up to
// date at start and its rows are read; one of a newer binary is refused.
func TestPostgresMigratesAnOlderSchema(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	ctx := context.Background()
	old := pgOpen(t, pg.URL(), "old")
	// Back to what a binary knowing only migrations 1 to 3 left behind.
	for _, q := range []string{`DROP VIEW nxdns_history`, `DROP TABLE nxdns_history_batches`, `DROP TABLE nxdns_history_schema`} {
		if _, err := old.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := migratePostgres(ctx, old.pool, 3); err != nil {
		t.Fatal(err)
	}
	// Rows as schemas 1 to 3 stored them, a row a row, more than one
	// batch of the move's.
	if _, err := old.pool.Exec(ctx, `INSERT INTO nxdns_history
		(ts, instance, client, client_name, proto, qname, qtype, rcode, source, upstream, duration_us, list)
		SELECT now() - (10000 - g) * interval '1 millisecond', 'old', '192.0.2.7', '', 'udp',
			'n' || g || '.example.', 1, 0, 'pool', 'quad9', 1230, ''
		FROM generate_series(1, 10000) g`); err != nil {
		t.Fatal(err)
	}
	old.close()

	st := pgOpen(t, pg.URL(), "new")
	defer st.close()
	var version int
	if err := st.pool.QueryRow(ctx, `SELECT version FROM nxdns_history_schema`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != len(pgMigrations) {
		t.Errorf("schema version %d after start, want %d", version, len(pgMigrations))
	}
	var kind string
	if err := st.pool.QueryRow(ctx, `SELECT table_type FROM information_schema.tables WHERE table_name = 'nxdns_history'`).Scan(&kind); err != nil || kind != "VIEW" {
		t.Errorf("nxdns_history after migration 4: %q, %v; want the view of the batches", kind, err)
	}
	var idx int
	if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE indexname = 'nxdns_history_batches_ts'`).Scan(&idx); err != nil || idx != 1 {
		t.Errorf("the batches' time index of migration 4: %d, %v", idx, err)
	}
	if n := pgCount(t, st); n != 10000 {
		t.Errorf("%d rows after migrating, want 10,000", n)
	}
	p, err := st.rows(ctx, filter{Instance: "old", Rcode: -1, Limit: 10})
	if err != nil || len(p.Rows) != 10 || p.Rows[0].QName != "n10000.example." || p.Rows[9].QName != "n9991.example." || p.Rows[0].Instance != "old" {
		t.Errorf("the old rows after migrating: %+v, %v", p.Rows, err)
	}
	// The rows' order survives the move: a page across the two
	// batches' seam (rows 8,192 and 8,193) is in it.
	p, err = st.rows(ctx, filter{Name: "n819", Rcode: -1, Limit: 20})
	if err != nil || len(p.Rows) != 11 || p.Rows[0].QName != "n8199.example." || p.Rows[10].QName != "n819.example." {
		t.Errorf("rows across the move's batches: %+v, %v", p.Rows, err)
	}

	if _, err := st.pool.Exec(ctx, `UPDATE nxdns_history_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openPostgres(pg.URL(), "older"); !errors.Is(err, errNewerSchema) {
		t.Errorf("opening a newer schema: %v, want errNewerSchema", err)
	}
}

// Retention runs on one replica at a time: while another holds the
// advisory lock, maintain deletes nothing; then it deletes exactly the
// old rows.
func TestPostgresRetentionOneReplicaAtATime(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	ctx := context.Background()
	st := pgOpen(t, pg.URL(), "a")
	defer st.close()
	now := time.Now()
	for i := range 10 { // a batch a day, as the writer would have written them
		r := someRow(0)
		r.Time = now.Add(-time.Duration(i) * 24 * time.Hour)
		if err := st.write([]Row{r, r}); err != nil {
			t.Fatal(err)
		}
	}
	// A batch that straddles the cutoff stays whole until its newest
	// row passes it.
	straddle := []Row{someRow(0), someRow(0)}
	straddle[0].Time = now.Add(-8 * 24 * time.Hour)
	straddle[1].Time = now.Add(-6 * 24 * time.Hour)
	if err := st.write(straddle); err != nil {
		t.Fatal(err)
	}
	other, err := st.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(pgLockRetention)); err != nil {
		t.Fatal(err)
	}
	cutoff := now.Add(-7*24*time.Hour + time.Hour) // days 7, 8, 9 are older
	if _, err := st.maintain(cutoff, 0); err != nil {
		t.Fatal(err)
	}
	if n := pgCount(t, st); n != 22 {
		t.Errorf("%d rows after maintain while another replica holds the lock, want 22", n)
	}
	if _, err := other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, int64(pgLockRetention)); err != nil {
		t.Fatal(err)
	}
	other.Release()
	if _, err := st.maintain(cutoff, 0); err != nil {
		t.Fatal(err)
	}
	if n := pgCount(t, st); n != 16 {
		t.Errorf("%d rows after maintain, want 16 (days 0 to 6, and the straddling batch)", n)
	}
	if st.size() <= 0 {
		t.Errorf("size %d, want the table's", st.size())
	}
}

// A database that cannot be reached at start: Open succeeds (DNS and the
// queue go on), the warning names the database without its password,
// and the API answers 503.
func TestPostgresUnreachableAtStart(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := config.Default().History
	cfg.Postgres = "postgres://nxdnsd:s3cret@127.0.0.1:1/h?sslmode=disable&connect_timeout=2"
	h, err := Open(cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.batchMax != pgMaxBatch {
		t.Errorf("a PostgreSQL history's batches of %d rows at most, want the queue's %d", h.batchMax, pgMaxBatch)
	}
	h.Record(someRow(0))
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/api/stats/top")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "unreachable") {
		t.Errorf("/api/stats/top: %d %q, want 503 saying unreachable", resp.StatusCode, body)
	}
	if logs.FilterMessageSnippet("unreachable").Len() == 0 {
		t.Errorf("no warning: %v", logs.All())
	}
	for _, e := range logs.All() {
		if b, _ := json.Marshal(e.ContextMap()); strings.Contains(string(b)+e.Message, "s3cret") {
			t.Errorf("the password is in the log: %s %s", e.Message, b)
		}
	}
	if strings.Contains(string(body), "s3cret") {
		t.Errorf("the password is in the answer: %s", body)
	}
}

// The binary COPY stores each field as the API reads it: the name in
// lower case (ASCII or not), NUL dropped and invalid UTF-8 replaced in
// every string, a mapped address unmapped, a zone kept, no address as
// "", an unknown source or proto as "", the duration in 10 µs, times
// before PostgreSQL's epoch (2000) and after it to the microsecond; a
// second batch in the same memory stores its own rows.
func TestPostgresRowsAsStored(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	st := pgOpen(t, pg.URL(), "edge-1")
	defer st.close()
	at := time.Date(2026, 12, 1, 19, 30, 15, 123456789, time.UTC)
	rows := []Row{
		{Time: at, Client: netip.MustParseAddr("::ffff:192.0.2.7"), ClientName: "Laptop\x00", Proto: "udp", QName: "WWW.Example.COM.",
			QType: 28, Rcode: 3, Source: "pool", Upstream: "quad9", Duration: 1_234_567, List: ""},
		{Time: time.Date(1999, 12, 31, 23, 59, 59, 999_999_000, time.UTC), Client: netip.MustParseAddr("fe80::1%eth0"), Proto: "quic",
			QName: "ÄRGER.example.", QType: 1, Source: "weird", Duration: 9_999},
		{Time: at.Add(time.Second), ClientName: "\xffbad", Proto: "https", QName: "A\x00B.", Source: "blocked", List: "ads\x00", Rcode: 0x1f3},
		{Time: at.Add(2 * time.Second), Proto: "tcp", Source: "local"}, // no question
	}
	type stored struct {
		ts                                                           time.Time
		instance, client, clientName, proto, qname, source, up, list string
		qtype, rcode                                                 int32
		us                                                           int64
	}
	want := []stored{
		{at.Truncate(time.Microsecond), "edge-1", "192.0.2.7", "Laptop", "udp", "www.example.com.", "pool", "quad9", "", 28, 3, 1230},
		{time.Date(1999, 12, 31, 23, 59, 59, 999_999_000, time.UTC), "edge-1", "fe80::1%eth0", "", "", "ärger.example.", "", "", "", 1, 0, 0},
		{at.Add(time.Second).Truncate(time.Microsecond), "edge-1", "", "\uFFFDbad", "https", "ab.", "blocked", "", "ads", 0, 0x1f3, 0},
		{at.Add(2 * time.Second).Truncate(time.Microsecond), "edge-1", "", "", "tcp", "", "local", "", "", 0, 0, 0},
	}
	read := func() []stored {
		t.Helper()
		rs, err := st.pool.Query(context.Background(), `SELECT ts, instance, client, client_name, proto, qname, source, upstream, list, qtype, rcode, duration_us
			FROM nxdns_history ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		var got []stored
		for rs.Next() {
			var s stored
			if err := rs.Scan(&s.ts, &s.instance, &s.client, &s.clientName, &s.proto, &s.qname, &s.source, &s.up, &s.list, &s.qtype, &s.rcode, &s.us); err != nil {
				t.Fatal(err)
			}
			s.ts = s.ts.UTC()
			got = append(got, s)
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if err := st.write(rows); err != nil {
		t.Fatal(err)
	}
	got := read()
	if len(got) != len(want) {
		t.Fatalf("%d rows stored, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d stored as\n%+v\nwant\n%+v", i, got[i], want[i])
		}
	}
	if err := st.write(rows[3:]); err != nil {
		t.Fatal(err)
	}
	if got := read(); len(got) != 5 || got[4] != want[3] {
		t.Errorf("the second batch stored %+v", got[len(got)-1])
	}
}

// The store's sessions commit without waiting for the WAL flush unless
// the connection string says how they should.
func TestPostgresSynchronousCommit(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	for _, tc := range []struct{ suffix, want string }{
		{"", "off"},
		{"&synchronous_commit=on", "on"},
		{"&options=-c%20synchronous_commit%3Dlocal", "local"},
	} {
		st := pgOpen(t, pg.URL()+tc.suffix, "a")
		var got string
		err := st.pool.QueryRow(context.Background(), `SHOW synchronous_commit`).Scan(&got)
		st.close()
		if err != nil || got != tc.want {
			t.Errorf("connection string ending %q: synchronous_commit %q, %v, want %q", tc.suffix, got, err, tc.want)
		}
	}
}

// Pages walked with cursors give every row once, newest first, when many
// rows share a microsecond or a millisecond (a cursor names a row by its
// millisecond and the low bits of its id), across the replicas' rows.
func TestPostgresCursorTies(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	a, b := pgOpen(t, pg.URL(), "a"), pgOpen(t, pg.URL(), "b")
	defer a.close()
	defer b.close()
	at := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	var rows []Row
	for i := range 30 {
		r := someRow(0)
		// Ten rows in one microsecond, ten more in the same millisecond,
		// ten in the millisecond before.
		r.Time = at.Add(time.Duration(i/10) * time.Microsecond)
		if i >= 20 {
			r.Time = at.Add(-time.Millisecond + time.Duration(i)*time.Microsecond)
		}
		r.QName = fmt.Sprintf("n%d.", i)
		rows = append(rows, r)
	}
	if err := a.write(rows[:15]); err != nil {
		t.Fatal(err)
	}
	if err := b.write(rows[15:]); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var last entry
	f := filter{Rcode: -1, Limit: 4}
	for pages := 0; ; pages++ {
		if pages > 30 {
			t.Fatal("the pages do not end")
		}
		p, err := a.rows(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Rows {
			if seen[e.QName] {
				t.Errorf("%s on two pages", e.QName)
			}
			seen[e.QName] = true
			if last.QName != "" && e.Time.After(last.Time) {
				t.Errorf("%s (%v) after %s (%v): not newest first", e.QName, e.Time, last.QName, last.Time)
			}
			last = e
		}
		if p.Next == 0 {
			break
		}
		f.Cursor = p.Next
	}
	if len(seen) != len(rows) {
		t.Errorf("%d rows on the pages, want %d", len(seen), len(rows))
	}
}

// A page is read one window of time at a time (pgStore.rowsOnce): rows
// a second, minutes, days and more than the last window apart, one of
// them stamped in the future by a replica whose clock is ahead, come in
// order on pages of two, each once, and From, To and a filter that
// matches few rows bound the walk as they bound one query.
func TestPostgresPagesAcrossWindows(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	st := pgOpen(t, pg.URL(), "edge-1")
	defer st.close()
	now := time.Now()
	ago := []time.Duration{-time.Hour, 0, 500 * time.Millisecond, 5 * time.Second, 90 * time.Second,
		2 * time.Hour, 3 * 24 * time.Hour, 20 * 24 * time.Hour, 45 * 24 * time.Hour, 400 * 24 * time.Hour}
	var rows []Row
	for i, d := range ago {
		r := someRow(0)
		r.Time = now.Add(-d)
		r.QName = fmt.Sprintf("n%d.", i)
		if i%3 == 0 {
			r.QName = fmt.Sprintf("rare%d.", i)
		}
		rows = append(rows, r)
	}
	if err := st.write(rows); err != nil {
		t.Fatal(err)
	}
	walk := func(f filter) []string {
		t.Helper()
		var names []string
		for pages := 0; ; pages++ {
			if pages > len(rows) {
				t.Fatal("the pages do not end")
			}
			p, err := st.rows(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Rows {
				names = append(names, e.QName)
			}
			if p.Next == 0 {
				return names
			}
			f.Cursor = p.Next
		}
	}
	want := func(idx ...int) string {
		var s []string
		for _, i := range idx {
			s = append(s, rows[i].QName)
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		name string
		f    filter
		want string
	}{
		{"all", filter{Rcode: -1, Limit: 2}, want(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)},
		{"one a page", filter{Rcode: -1, Limit: 1}, want(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)},
		{"a page of all", filter{Rcode: -1, Limit: 100}, want(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)},
		{"few match", filter{Name: "rare", Rcode: -1, Limit: 2}, want(0, 3, 6, 9)},
		{"from", filter{From: now.Add(-30 * 24 * time.Hour), Rcode: -1, Limit: 3}, want(0, 1, 2, 3, 4, 5, 6, 7)},
		{"to", filter{To: now.Add(-time.Minute), Rcode: -1, Limit: 2}, want(4, 5, 6, 7, 8, 9)},
		{"from and to", filter{From: now.Add(-3*24*time.Hour - time.Second), To: now.Add(-time.Second), Rcode: -1, Limit: 2}, want(3, 4, 5, 6)},
	} {
		if got := strings.Join(walk(c.f), " "); got != c.want {
			t.Errorf("%s: pages %q, want %q", c.name, got, c.want)
		}
	}
}

// The windows' reads are what the batches' time index serves: with a
// table of some size and its statistics, the planner finds a window's
// batches through nxdns_history_batches_ts, not by opening every batch.
func TestPostgresWindowUsesTheTimeIndex(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	st := pgOpen(t, pg.URL(), "edge-1")
	defer st.close()
	ctx := context.Background()
	// 2,000 batches of 100 rows, a millisecond apart, in time order, as
	// replicas write them.
	for at := 0; at < 200000; at += 20000 {
		rows := make([]Row, 0, 20000)
		for g := at + 1; g <= at+20000; g++ {
			r := someRow(0)
			r.Time = time.Now().Add(time.Duration(g-200000) * time.Millisecond)
			r.QName = "n" + strconv.Itoa(g) + ".example."
			rows = append(rows, r)
		}
		for len(rows) > 0 {
			if err := st.write(rows[:100]); err != nil {
				t.Fatal(err)
			}
			rows = rows[100:]
		}
	}
	if _, err := st.pool.Exec(ctx, `ANALYZE nxdns_history_batches`); err != nil {
		t.Fatal(err)
	}
	w := new(where)
	w.span("", time.Now().Add(-pgFirstWindow), time.Time{})
	q := `EXPLAIN SELECT id FROM nxdns_history` + w.sql() + ` ORDER BY ts DESC, id DESC LIMIT 101`
	rs, err := st.pool.Query(ctx, q, w.args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rs.Next() {
		var line string
		if err := rs.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(plan, "\n"); !strings.Contains(p, "nxdns_history_batches_ts") {
		t.Errorf("a window's plan does not read the time index:\n%s", p)
	}
	p, err := st.rows(ctx, filter{Rcode: -1, Limit: 100})
	if err != nil || len(p.Rows) != 100 || p.Rows[0].QName != "n200000.example." {
		t.Errorf("the first page: %d rows, first %+v, %v", len(p.Rows), p.Rows[:min(1, len(p.Rows))], err)
	}
}

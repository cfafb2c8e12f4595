package history_test

import (
	"maps"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"pgregory.net/rapid"

	"github.com/nxdnsd/nxdnsd/history"
	"github.com/nxdnsd/nxdnsd/history/historytest"
	"github.com/nxdnsd/nxdnsd/internal/pgtest"
)

// forStores runs an API test against each store: the same rows give the
// same answers from a SQLite file and from PostgreSQL.
func forStores(t *testing.T, test func(t *testing.T, kind string)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) { test(t, kind) })
	}
}

// fixture is a history file holding rows made by historytest over two
// hours ending a little before now, and the rows themselves.
func fixture(t *testing.T, kind string, count int, net historytest.Network) (*history.History, []history.Row, time.Time) {
	t.Helper()
	var h *history.History
	switch kind {
	case "sqlite":
		// Chunks of 97 rows: the reads cross sealed and small chunks.
		var err error
		if h, err = history.OpenSmallChunks(filepath.Join(t.TempDir(), "history.db"), 97); err != nil {
			t.Fatal(err)
		}
	case "postgres":
		h = openPostgres(t, pgtest.Start(t).URL(), "test")
	}
	t.Cleanup(func() { h.Close() })
	end := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	var rows []history.Row
	for r := range net.Rows(end.Add(-2*time.Hour), end, count) {
		r.Time = r.Time.Truncate(time.Microsecond)
		rows = append(rows, r)
		h.Record(r)
		if kind == "sqlite" && len(rows)%61 == 0 {
			h.Sync() // batches of 61: small chunks, merged when 97 rows or more
		}
	}
	h.Sync()
	if h.Rows() != uint64(count) {
		t.Fatalf("%d rows written, want %d", h.Rows(), count)
	}
	return h, rows, end
}

// Every filter and combination of filters returns exactly the rows that
// match all of them, newest first, however the page is found (the name
// index, the client's minutes, a scan; a substring matching too many
// names to look up one by one).
func TestFiltersCombine(t *testing.T) {
	t.Parallel()
	// Most names are asked once: more than the name filter looks up one by
	// one (maxNameIDs, 2000) contain ".".
	forStores(t, func(t *testing.T, kind string) { testFiltersCombine(t, kind) })
}

func testFiltersCombine(t *testing.T, kind string) {
	h, rows, end := fixture(t, kind, 2400, historytest.Network{Seed: 3, Popular: 50, Clients: 6, OneOffRate: 0.88})
	srv := api(t, h)
	distinct := map[string]bool{}
	for _, r := range rows {
		distinct[r.QName] = true
	}
	if len(distinct) <= 2000 {
		t.Fatalf("%d names: the case of a substring matching more than 2000 is not made", len(distinct))
	}
	from, to := end.Add(-90*time.Minute).Add(123*time.Millisecond), end.Add(-10*time.Minute)
	cases := []url.Values{
		{},
		{"name": {"SITE1"}},
		{"name": {"tracker4"}},
		{"name": {"."}}, // every name: more than the lookup bound
		{"name": {"no-such-name"}},
		{"client": {"192.168.1.12"}},
		{"client": {"host-2"}},
		{"client": {"HOST-4"}},
		{"client": {"192.168.1.99"}},
		{"type": {"AAAA"}},
		{"type": {"65"}},
		{"source": {"blocked"}},
		{"rcode": {"NXDOMAIN"}},
		{"upstream": {"quad9"}},
		{"from": {from.Format(time.RFC3339Nano)}, "to": {strconv.FormatFloat(float64(to.UnixMicro())/1e6, 'f', 6, 64)}},
		{"name": {"site2"}, "client": {"192.168.1.10"}, "type": {"A"}},
		{"client": {"host-0"}, "source": {"pool"}, "upstream": {"cloudflare"}, "from": {from.Format(time.RFC3339Nano)}},
		{"name": {"example"}, "rcode": {"0"}, "source": {"cache"}, "to": {to.Format(time.RFC3339Nano)}},
	}
	for _, q := range cases {
		var want []string
		for i := len(rows) - 1; i >= 0; i-- {
			if r := rows[i]; matches(r, q) {
				want = append(want, key(r.Time.UTC().Format("2006-01-02T15:04:05.000000Z07:00"), strings.ToLower(r.QName)))
			}
		}
		var got []string
		seen := map[string]bool{}
		qq := with(q, "limit", "97")
		for pages := 0; ; pages++ {
			var page pageJSON
			if code := get(t, srv, "/api/history", qq, &page); code != 200 {
				t.Fatalf("%v: status %d", q, code)
			}
			for _, r := range page.Rows {
				k := key(r.TS, str(r.QName))
				if seen[k] {
					t.Fatalf("%v: row %s twice", q, k)
				}
				seen[k] = true
				got = append(got, k)
			}
			if page.Next == nil {
				break
			}
			if len(page.Rows) != 97 {
				t.Fatalf("%v: a page of %d rows with a next", q, len(page.Rows))
			}
			qq.Set("cursor", *page.Next)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: %d rows, want %d", q, len(got), len(want))
		}
	}
}

func key(ts, name string) string { return ts + " " + name }

// matches is the API's filter, written out plainly.
func matches(r history.Row, q url.Values) bool {
	if v := q.Get("name"); v != "" && !strings.Contains(strings.ToLower(r.QName), strings.ToLower(v)) {
		return false
	}
	if v := q.Get("client"); v != "" && r.Client.String() != v && !strings.EqualFold(r.ClientName, v) {
		return false
	}
	if v := q.Get("type"); v != "" {
		t, ok := dns.StringToType[v]
		if !ok {
			n, _ := strconv.Atoi(v)
			t = uint16(n)
		}
		if r.QType != t {
			return false
		}
	}
	if v := q.Get("source"); v != "" && r.Source != v {
		return false
	}
	if v := q.Get("rcode"); v != "" {
		rc, ok := dns.StringToRcode[v]
		if !ok {
			rc, _ = strconv.Atoi(v)
		}
		if r.Rcode != rc {
			return false
		}
	}
	if v := q.Get("upstream"); v != "" && r.Upstream != v {
		return false
	}
	if v := q.Get("from"); v != "" && r.Time.Before(parse(v)) {
		return false
	}
	if v := q.Get("to"); v != "" && !r.Time.Before(parse(v)) {
		return false
	}
	return true
}

func parse(v string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t
	}
	f, _ := strconv.ParseFloat(v, 64)
	return time.UnixMicro(int64(f*1e6 + 0.5))
}

// Paging while rows arrive: the pages of the rows there were at the first
// page hold each of them exactly once; the rows that arrive meanwhile are
// newer, and come on no page of this walk.
func TestCursorPagesWhileRowsArrive(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, kind string) { testCursorPagesWhileRowsArrive(t, kind) })
}

func testCursorPagesWhileRowsArrive(t *testing.T, kind string) {
	h, rows, end := fixture(t, kind, 1000, historytest.Network{Seed: 5, Popular: 30, OneOffDay: 100, Clients: 4})
	srv := api(t, h)
	var got []string
	q := url.Values{"limit": {"150"}, "client": {"192.168.1.10"}}
	for i := 0; ; i++ {
		var page pageJSON
		if code := checked(t, srv, "/api/history", q, &page); code != 200 {
			t.Fatalf("status %d", code)
		}
		for _, r := range page.Rows {
			got = append(got, key(r.TS, str(r.QName)))
		}
		// Rows keep arriving, newer than any before.
		for j := range 50 {
			h.Record(history.Row{Time: end.Add(time.Duration(i*50+j) * time.Millisecond), Client: rows[0].Client, QName: "new.example.", QType: 1})
		}
		h.Sync()
		if page.Next == nil {
			break
		}
		q.Set("cursor", *page.Next)
	}
	var want []string
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].Client.String() == "192.168.1.10" {
			want = append(want, key(rows[i].Time.UTC().Format("2006-01-02T15:04:05.000000Z07:00"), strings.ToLower(rows[i].QName)))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged %d rows, want the %d there were, each once", len(got), len(want))
	}
}

// The top lists and the timeline count what the rows say, over ranges
// that start and end inside a minute and an hour (part counters, part
// rows), and steps that are not whole minutes.
func TestStatsCountTheRows(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, kind string) { testStatsCountTheRows(t, kind) })
}

func testStatsCountTheRows(t *testing.T, kind string) {
	h, rows, end := fixture(t, kind, 2000, historytest.Network{Seed: 9, Popular: 40, OneOffDay: 2000, Clients: 5})
	srv := api(t, h)
	for _, span := range [][2]time.Time{
		{end.Add(-2 * time.Hour), end.Add(time.Minute)},
		{end.Add(-100*time.Minute + 17*time.Second), end.Add(-3*time.Minute - 5*time.Second)},
		{end.Add(-30 * time.Second), end.Add(-10 * time.Second)},
	} {
		from, to := span[0], span[1]
		in := func(r history.Row) bool { return !r.Time.Before(from) && r.Time.Before(to) }
		q := url.Values{"from": {from.Format(time.RFC3339Nano)}, "to": {to.Format(time.RFC3339Nano)}, "limit": {"5"}}
		for _, what := range []string{"domains", "blocked", "clients", "upstreams"} {
			counts := map[string]int64{}
			for _, r := range rows {
				if !in(r) {
					continue
				}
				switch what {
				case "domains":
					counts[strings.ToLower(r.QName)]++
				case "blocked":
					if r.Source == "blocked" {
						counts[strings.ToLower(r.QName)]++
					}
				case "clients":
					counts[r.Client.String()]++
				case "upstreams":
					if r.Upstream != "" {
						counts[r.Upstream]++
					}
				}
			}
			var want []countJSON
			for k, n := range counts {
				want = append(want, countJSON{k, n})
			}
			sort.Slice(want, func(i, j int) bool {
				if want[i].Count != want[j].Count {
					return want[i].Count > want[j].Count
				}
				return want[i].Key < want[j].Key
			})
			want = want[:min(5, len(want))]
			var got []countJSON
			if code := checked(t, srv, "/api/stats/top", with(q, "what", what), &got); code != 200 {
				t.Fatalf("top %s: %d", what, code)
			}
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("top %s over %v..%v: %v, want %v", what, from, to, got, want)
			}
		}
		for _, step := range []int{600, 60, 7} {
			var got []bucketJSON
			if code := checked(t, srv, "/api/stats/timeline", with(q, "step", strconv.Itoa(step)), &got); code != 200 {
				t.Fatalf("timeline: %d", code)
			}
			want := map[int64]*bucketJSON{}
			var order []int64
			st := int64(step) * 1e6
			for b := floor(from.UnixMicro(), st); b <= floor(to.UnixMicro()-1, st); b++ {
				want[b] = &bucketJSON{TS: time.UnixMicro(b * st).UTC().Format(time.RFC3339)}
				order = append(order, b)
			}
			for _, r := range rows {
				if !in(r) {
					continue
				}
				b := want[floor(r.Time.UnixMicro(), st)]
				b.Total++
				switch {
				case r.Rcode == 2:
					b.Failed++
				case r.Source == "blocked":
					b.Blocked++
				case r.Source == "cache" || r.Source == "stale":
					b.Cached++
				case r.Source == "pool" || r.Source == "forward_zone":
					b.Forwarded++
				default:
					b.Local++
				}
			}
			if len(got) != len(order) {
				t.Fatalf("timeline step %d: %d buckets, want %d", step, len(got), len(order))
			}
			for i, b := range order {
				if got[i] != *want[b] {
					t.Errorf("timeline step %d bucket %d: %+v, want %+v", step, i, got[i], *want[b])
				}
			}
		}
	}
}

type countJSON struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
}

type bucketJSON struct {
	TS        string `json:"ts"`
	Total     int64  `json:"total"`
	Forwarded int64  `json:"forwarded"`
	Cached    int64  `json:"cached"`
	Blocked   int64  `json:"blocked"`
	Failed    int64  `json:"failed"`
	Local     int64  `json:"local"`
}

func floor(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// Bad parameters are refused with 400, every problem named.
func TestBadParameters(t *testing.T) {
	t.Parallel()
	h := open(t, "")
	defer h.Close()
	srv := api(t, h)
	for _, c := range []struct {
		path string
		q    url.Values
	}{
		{"/api/history", url.Values{"type": {"NOPE"}}},
		{"/api/history", url.Values{"rcode": {"-1"}}},
		{"/api/history", url.Values{"limit": {"0"}}},
		{"/api/history", url.Values{"cursor": {"!"}}},
		{"/api/history", url.Values{"from": {"yesterday"}}},
		{"/api/stats/top", url.Values{"what": {"names"}}},
		{"/api/stats/top", url.Values{"from": {"2000"}, "to": {"1000"}}},
		{"/api/stats/timeline", url.Values{"step": {"0"}}},
		{"/api/stats/timeline", url.Values{"step": {"9300000000"}}},                                               // overflowed a time.Duration
		{"/api/stats/timeline", url.Values{"step": {"2592000"}, "from": {"-99999999999"}, "to": {"99999999999"}}}, // 77,000 buckets
		{"/api/stats/timeline", url.Values{"step": {"1"}, "from": {"0"}, "to": {"1000000"}}},
	} {
		if code := get(t, srv, c.path, c.q, nil); code != 400 {
			t.Errorf("%s?%s: %d, want 400", c.path, c.q.Encode(), code)
		}
	}
	var nilH *history.History
	if code := get(t, api(t, nilH), "/api/history", url.Values{}, nil); code != 503 {
		t.Errorf("history off: %d, want 503", code)
	}
}

// Whatever the parameters, the API answers 200 or 400: never a 500, never
// a panic (which the test server would turn into a dropped connection).
func TestParametersNeverFail(t *testing.T) {
	t.Parallel()
	h, _, _ := fixture(t, "sqlite", 300, historytest.Network{Seed: 11, Popular: 20, OneOffDay: 100, Clients: 3})
	srv := api(t, h)
	values := []string{"", "0", "1", "-1", "7", "600", "1000", "1001", "99999999999", "-99999999999", "9300000000",
		"2026-11-29T18:00:00Z", "2026-11-29T18:00:00.123456+01:00", "1.5", "NaN", "Inf", "1e300", "A", "aaaa", "TYPE65",
		"NXDOMAIN", "%", "_", `\`, "192.168.1.10", "host-0", "::ffff:192.168.1.10", "pool", "blocked", "quad9", "z", "zzzzzzzzzzzzzz"}
	paths := map[string][]string{
		"/api/history":        {"client", "name", "type", "source", "rcode", "upstream", "from", "to", "limit", "cursor"},
		"/api/stats/top":      {"what", "from", "to", "limit"},
		"/api/stats/timeline": {"from", "to", "step"},
	}
	rapid.Check(t, func(rt *rapid.T) {
		path := rapid.SampledFrom([]string{"/api/history", "/api/stats/top", "/api/stats/timeline"}).Draw(rt, "path")
		q := url.Values{}
		for _, name := range paths[path] {
			if v := rapid.SampledFrom(values).Draw(rt, name); v != "" {
				q.Set(name, v)
			}
		}
		if path == "/api/stats/top" && rapid.Bool().Draw(rt, "valid what") {
			q.Set("what", rapid.SampledFrom([]string{"domains", "blocked", "clients", "upstreams"}).Draw(rt, "what"))
		}
		if code := get(t, srv, path, q, nil); code != 200 && code != 400 {
			rt.Fatalf("%s?%s: %d", path, q.Encode(), code)
		}
	})
}

// Two replicas share one database: either's API shows both instances'
// rows, each tagged; instance= narrows the rows, the top lists and the
// timeline to one. A SQLite history answers for its own instance only.
func TestInstancesShareADatabase(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	a, b := openPostgres(t, pg.URL(), "edge-a"), openPostgres(t, pg.URL(), "edge-b")
	defer a.Close()
	defer b.Close()
	end := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	for i := range 30 {
		r := history.Row{Time: end.Add(-time.Duration(i) * time.Second), Client: netip.MustParseAddr("192.0.2.1"), Proto: "udp", QName: "a.example.", QType: 1, Source: "cache"}
		a.Record(r)
		if i < 20 {
			r.QName, r.Source = "b.example.", "pool"
			b.Record(r)
		}
	}
	a.Sync()
	b.Sync()
	q := url.Values{"from": {end.Add(-time.Hour).Format(time.RFC3339)}, "to": {end.Add(time.Second).Format(time.RFC3339)}}
	for _, h := range []*history.History{a, b} {
		srv := api(t, h)
		for instance, want := range map[string]map[string]int{"": {"edge-a": 30, "edge-b": 20}, "edge-a": {"edge-a": 30}, "edge-b": {"edge-b": 20}, "edge-c": {}} {
			var page pageJSON
			if code := checked(t, srv, "/api/history", with(with(q, "limit", "1000"), "instance", instance), &page); code != 200 {
				t.Fatalf("status %d", code)
			}
			got := map[string]int{}
			for _, r := range page.Rows {
				got[r.Instance]++
				if (r.Instance == "edge-a") != (str(r.QName) == "a.example.") {
					t.Errorf("row %+v tagged with the wrong instance", r)
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("instance=%q: rows per instance %v, want %v", instance, got, want)
			}
			var top []countJSON
			if code := checked(t, srv, "/api/stats/top", with(q, "instance", instance), &top); code != 200 {
				t.Fatalf("top: status %d", code)
			}
			var tl []bucketJSON
			if code := checked(t, srv, "/api/stats/timeline", with(with(q, "instance", instance), "step", "86400"), &tl); code != 200 {
				t.Fatalf("timeline: status %d", code)
			}
			var topSum, tlSum int64
			for _, c := range top {
				topSum += c.Count
			}
			for _, bk := range tl {
				tlSum += bk.Total
			}
			if n := int64(want["edge-a"] + want["edge-b"]); topSum != n || tlSum != n {
				t.Errorf("instance=%q: top counts %d, timeline %d, want %d", instance, topSum, tlSum, n)
			}
		}
	}

	// This replica's own SQLite history.
	h := open(t, "")
	defer h.Close()
	h.Record(history.Row{Time: end, QName: "x.example.", QType: 1})
	h.Sync()
	srv := api(t, h)
	host, _ := os.Hostname()
	for instance, want := range map[string]int{"": 1, host: 1, "another": 0} {
		var page pageJSON
		if code := checked(t, srv, "/api/history", url.Values{"instance": {instance}}, &page); code != 200 {
			t.Fatalf("status %d", code)
		}
		if len(page.Rows) != want || (want == 1 && page.Rows[0].Instance != host) {
			t.Errorf("SQLite, instance=%q: %+v, want %d rows of %q", instance, page.Rows, want, host)
		}
	}
}

// A top list over the widest range stops at the newest row: centuries of
// hours ahead of it cost nothing (before, from=-99999999999&to=99999999999
// walked every hour up to the year 5138, 1.7 GB and 6 s, which FuzzAPI's
// worker did not survive), and the answer is the one over the rows' own
// span. Not parallel: the bound is on the process's allocations.
// Mutation check: without topRolled's clamp the request allocates
// hundreds of MiB and fails the bound.
func TestTopOfAFarRangeStopsAtTheNewestRow(t *testing.T) {
	h := open(t, "")
	t.Cleanup(func() { h.Close() })
	end := time.Now().Add(-time.Minute)
	for r := range (historytest.Network{Seed: 5, Popular: 20, OneOffDay: 100, Clients: 3}).Rows(end.Add(-3*time.Hour), end, 500) {
		h.Record(r)
	}
	h.Sync()
	srv := api(t, h)
	span := url.Values{"from": {strconv.FormatInt(end.Add(-4*time.Hour).Unix(), 10)}, "to": {strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)}}
	far := url.Values{"from": {"-99999999999"}, "to": {"99999999999"}}
	for _, what := range []string{"domains", "clients"} {
		var want, got []countJSON
		if code := checked(t, srv, "/api/stats/top", with(span, "what", what), &want); code != 200 || len(want) == 0 {
			t.Fatalf("top %s over the rows' span: %d, %v", what, code, want)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if code := checked(t, srv, "/api/stats/top", with(far, "what", what), &got); code != 200 {
			t.Fatalf("top %s over the widest range: %d", what, code)
		}
		runtime.ReadMemStats(&after)
		if d := after.TotalAlloc - before.TotalAlloc; d > 64<<20 {
			t.Errorf("top %s over the widest range allocated %d MiB", what, d>>20)
		}
		if !slices.Equal(got, want) {
			t.Errorf("top %s over the widest range: %v, want %v (the rows' span)", what, got, want)
		}
	}
}
